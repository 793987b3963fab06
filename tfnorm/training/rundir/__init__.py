"""The run directory: where everything goes (`paths`), who may write there
(`lock`), checkpoints and where a run resumes from (`checkpoints`, `resume`),
the run's identity and what may change on resume (`run_identity`), what a run
leaves behind (`outputs`: summary, export, vocabulary and label copies, exit
statuses), the progress log (`progress_log`) and the TensorBoard events a
resumed run writes again (`events`)."""
