"""Driving the steps (`driver.run_loop`) and everything that happens between
two steps, each as an action: the NaN guard, checkpoints and evaluation
(`actions`), progress lines, TensorBoard scalars and norm histograms
(`reporting`), and the stop on a signal (`signals`)."""
