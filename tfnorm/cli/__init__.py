"""The `tfnorm` command: a thin layer over the library."""
