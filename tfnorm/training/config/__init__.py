"""What a run is asked to do, read and checked without building anything:
the setting declarations (`settings`), the train config (`train_config`), the
YAML/JSON file reader (`config_file`) and the checks across settings
(`checks`).

Nothing here imports TensorFlow at module level: the `tfnorm` command builds
its parser from these declarations before TensorFlow is loaded.
"""
