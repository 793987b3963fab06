"""What is trained. `base.Workload` declares what the run asks of it;
`classifier.ClassifierWorkload` (tfnorm's classifier on a task or a text file)
and `own_model.OwnModelWorkload` (the user's `model_fn` on their `data_fn`)
implement it. `build` assembles the strategy, precision policy, model and
optimizer both use; `steps` makes their step functions."""
