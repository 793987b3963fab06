"""What is trained. `base.Workload` declares what the run asks of it;
`classifier.ClassifierWorkload` (tfnorm's classifier on a task or a text file),
`language_model.LanguageModelWorkload` (a decoder on text, `task` "lm") and
`own_model.OwnModelWorkload` (the user's `model_fn` on their `data_fn`)
implement it; `selection.select_workload` picks one. `build` assembles the
strategy, precision policy, model and optimizer they use; `steps` makes their
step functions."""
