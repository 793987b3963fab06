"""What a run is asked to do, read and checked without building anything:
the train config (`train_config`, its fields declared by part in
`data_settings`, `model_settings` and `run_settings` with the mechanism of
`tfnorm.settings`), the workloads each setting applies to
(`workload_scope`), the readers of its own kinds of values (`readers`), the
YAML/JSON file reader (`config_file`) and the checks across settings
(`checks`, `model_checks`).

Nothing here imports TensorFlow at module level: the `tfnorm` command builds
its parser from these declarations before TensorFlow is loaded.
"""
