"""`tfnorm train` with hostile or clumsy input: each is one line on stderr, exit 2.

Every row is a flag or a config-file value a user could plausibly give. The
promise for each: exit status 2, exactly one stderr line naming the setting
and the value, no traceback, and nothing created on disk (the run's logdir
and checkpoint directory do not appear).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tfnorm.cli.main import main


def yaml_config(text):
    def arguments(tmp_path):
        path = tmp_path / "run.yaml"
        path.write_text(f"task: sorted\nlogdir: {tmp_path / 'run'}\n{text}")
        return ["--config", str(path)]

    return arguments


def flags(*argv):
    def arguments(tmp_path):
        return ["--task", "sorted", "--logdir", str(tmp_path / "run"), *argv]

    return arguments


def file_at(name):
    """Flags whose path `name` exists as a file."""

    def arguments(tmp_path):
        (tmp_path / name).write_text("not a directory\n")
        flag = {"run": "--logdir", "ckpt": "--checkpoint-dir", "log": "--log-file"}
        argv = ["--task", "sorted", "--logdir", str(tmp_path / "run")]
        return argv + [flag[name], str(tmp_path / name)]

    return arguments


def text_run(*argv):
    """A language model's flags on a small text, and `argv`."""

    def arguments(tmp_path):
        (tmp_path / "t.txt").write_text("some text to model, " * 20)
        return ["--task", "lm", "--data", str(tmp_path / "t.txt"), "--logdir", str(tmp_path / "run"), *argv]  # fmt: skip

    return arguments


def bad_utf8_config(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes(b"task: sorted\n# caf\xe9\n")
    return ["--config", str(path), "--logdir", str(tmp_path / "run")]


def directory_as(flag):
    def arguments(tmp_path):
        (tmp_path / "somedir").mkdir(exist_ok=True)
        argv = ["--task", "sorted", "--logdir", str(tmp_path / "run")]
        if flag == "--data":
            argv = ["--logdir", str(tmp_path / "run")]
        return argv + [flag, str(tmp_path / "somedir")]

    return arguments


# (name, arguments(tmp_path) -> argv, what the one line must contain)
CONFIG_CASES = [
    ("empty logdir", flags("--logdir", ""), r"--logdir .*logdir=''"),
    ("missing config file", lambda t: ["--config", str(t / "nope.yaml")], r"No such config file\. Received: --config '[^']*nope\.yaml'\n"),
    ("logdir is a file", file_at("run"), r"--logdir .*is a file"),
    ("checkpoint dir is a file", file_at("ckpt"), r"--checkpoint-dir .*is a file"),
    ("log file is a dir", directory_as("--log-file"), r"--log-file .*is a directory"),
    ("data is a dir", directory_as("--data"), r"--data .*it is a directory"),
    ("data is a fifo", lambda t: ["--logdir", str(t / "run"), "--data", fifo(t, "t.csv")], r"--data .*it is not a regular file"),
    ("val data is a fifo", lambda t: ["--task", "sorted", "--logdir", str(t / "run"), "--val-data", fifo(t, "v.csv")], r"--val-data .*it is not a regular file"),
    ("seed too big", flags("--seed", "4294967296"), r"--seed .*4294967295\]"),
    ("seed negative", flags("--seed", "-1"), r"--seed .*seed=-1"),
    ("max_len 1", flags("--max-len", "1"), r"--max-len .*\[2, .*max_len=1"),
    ("nan lr", flags("--learning-rate", "nan"), r"--learning-rate .*finite"),
    ("inf clipnorm", flags("--clipnorm", "inf"), r"--clipnorm .*clipnorm=inf"),
    ("clipnorm past float32", flags("--clipnorm", "4e38"), r"--clipnorm .*in \(0, 3\.40282e\+38\]\. Received: clipnorm=4e\+38"),
    ("learning rate past float32", flags("--learning-rate", "1e300"), r"--learning-rate .*in \(0, 3\.40282e\+38\]"),
    ("dropout 1", flags("--dropout", "1"), r"--dropout-rate .*\[0, 1\)"),
    ("huge width", flags("--d-model", "1073741824"), r"--d-model .*\[1, 65536\]. Received: d_model=1073741824"),
    ("int overflow", flags("--epochs", "99999999999"), r"--epochs .*2147483647"),
    ("heads", flags("--num-heads", "3"), r"--d-model .*d_model=64, num_heads=3"),
    ("one class", flags("--num-classes", "1"), r"--num-classes .*num_classes=1"),
    ("huge head", lambda tmp_path: data_file("t.csv", "text,label\na,0\n", "--num-classes", "2147483647")(tmp_path), r"--num-classes .*weights"),
    ("majority classes", flags("--task", "majority", "--num-classes", "40"), r"num_classes=40, vocab_size=33"),
    ("vocab 2", flags("--vocab-size", "2"), r"--vocab-size .*in \[3, .*Received: vocab_size=2"),
    ("duplicate vocab", flags("--task", "duplicate", "--vocab-size", "8"), r"--vocab-size .*vocab_size=8, max_len=16"),
    ("unknown norm", flags("--norm", "batch"), r"--norm .*Unknown norm 'batch'"),
    ("epsilon underflows", flags("--epsilon", "1e-46"), r"--epsilon .*epsilon"),
    ("devices empty", flags("--devices", ","), r"--devices .*devices=\[\]"),
    ("devices cpu:9 mirrored", flags("--strategy", "mirrored", "--devices", "/cpu:0,/cpu:9"), r"--devices .*no device /cpu:9 \(it has /cpu:0, /cpu:1\)"),
    ("devices gpu:7", flags("--devices", "/gpu:7"), r"--devices .*no device /gpu:7"),
    ("devices one_device gpu:7", flags("--strategy", "one_device", "--devices", "/gpu:7"), r"--devices .*no device /gpu:7"),
    ("devices newline", flags("--devices", "/cpu:0\n/cpu:1"), r"--devices .*'/cpu:0\\n/cpu:1' is not one"),
    ("yaml devices newline", yaml_config('devices: ["/cpu:0\\nListen"]\n'), r"--devices .*is not one"),
    ("bad utf-8 config", bad_utf8_config, r"run\.yaml, line 2: not UTF-8"),
    ("yaml logdir 5", yaml_config("logdir: 5\n"), r"--logdir .*logdir=5"),
    ("yaml logdir list", yaml_config("logdir: [a, b]\n"), r"logdir=\['a', 'b'\]"),
    ("yaml bool int", yaml_config("num_layers: true\n"), r"num_layers=True"),
    ("yaml list int", yaml_config("d_model: [64]\n"), r"d_model=\[64\]"),
    ("yaml dict float", yaml_config("learning_rate: {a: 1}\n"), r"learning_rate"),
    ("yaml nan", yaml_config("weight_decay: .nan\n"), r"weight_decay=nan"),
    ("yaml -inf", yaml_config("learning_rate: -.inf\n"), r"learning_rate=-inf"),
    ("yaml float int", yaml_config("batch_size: 32.5\n"), r"batch_size=32.5"),
    ("yaml huge batch", yaml_config("batch_size: 1e12\n"), r"batch_size='1e12'"),
    ("yaml task list", yaml_config("task: [sorted]\n"), r"task=\['sorted'\]"),
    ("yaml norm number", yaml_config("norm: 5\n"), r"--norm .*norm=5"),
    ("yaml norm axis 0", yaml_config("norm: {class_name: tfnorm>LayerNormalization, config: {axis: 0}}\n"), r"--norm .*axis 0 .*Received: norm\.config\.axis=0$"),
    ("yaml norm axis 5", yaml_config("norm: {class_name: tfnorm>RMSNorm, config: {axis: 5}}\n"), r"--norm .*`axis` 5 is out of range.*Received: norm\.config\.axis=5$"),
    ("yaml norm dtype float16", yaml_config("norm: {class_name: tfnorm>LayerNormalization, config: {dtype: float16}}\n"), r"--norm .*Received: norm\.config\.dtype='float16'$"),
    ("yaml norm center string", yaml_config("norm: {class_name: tfnorm>LayerNormalization, config: {center: 'false'}}\n"), r"--norm .*center='false'"),
    ("yaml norm dict", yaml_config("norm: {class_name: Dropout, config: {rate: 0.1}}\n"), r"--norm .*Dropout"),
    ("yaml precision list", yaml_config("mixed_precision: [a]\n"), r"mixed_precision=\['a'\]"),
    ("yaml export", yaml_config("export: maybe\n"), r"--no-export \(config key export\): .*export='maybe'"),
    ("yaml devices", yaml_config("devices: {a: 1}\n"), r"devices=\{'a': 1\}"),
    ("yaml null size", yaml_config("d_model: null\n"), r"--d-model .*d_model=None"),
    ("yaml no data", yaml_config("task: null\n"), r"--task .*exactly one data source"),
    ("yaml nul byte", yaml_config('logdir: "a\\0b"\n'), r"--logdir .*logdir='a\\x00b'"),
    ("yaml unknown key", yaml_config("learnig_rate: 0.1\n"), r"Unknown training setting"),
    ("yaml a list", lambda tmp_path: ["--config", str(write(tmp_path, "- a\n"))], r"must hold a mapping"),
    ("yaml octal", yaml_config("batch_size: 010\n"), r"--batch-size .*run\.yaml, line 3: YAML 1\.1 reads 010 as octal, 8, while the flag reads 10"),
    ("yaml octal in a list", yaml_config("devices: [/cpu:0, 07]\n"), r"--devices .*line 3: YAML 1\.1 reads 07 as octal"),
    ("yaml base 60", yaml_config("seed: 1:30\n"), r"--seed .*line 3: YAML 1\.1 reads 1:30 as the base-60 number 90"),
    ("yaml nested 10000 deep", yaml_config("seed: " + "[" * 10000 + "]" * 10000 + "\n"), r"run\.yaml: nested too deeply"),
    ("json nested 10000 deep", lambda t: ["--config", str(write(t, '{"seed": ' + "[" * 10000 + "]" * 10000 + "}", "run.json"))], r"run\.json: nested too deeply"),
    ("config is a directory", lambda t: ["--task", "sorted", "--config", str(t)], r"The config file is a directory"),
    ("config is a fifo", lambda t: ["--task", "sorted", "--config", fifo(t, "run.yaml")], r"The config file is not a regular file"),
    # Steps, evaluation and the optimizer (issue 46).
    ("max steps 0", flags("--max-steps", "0"), r"--max-steps .*Received: max_steps=0"),
    ("warm-up past max steps", flags("--max-steps", "3", "--warmup-steps", "5"), r"--warmup-steps .*exceeds the run's 3 steps \(max_steps=3\)"),
    ("eval every 0", flags("--eval-every", "0"), r"--eval-every .*Received: eval_every=0"),
    ("eval batches without lm", flags("--eval-batches", "2"), r"--eval-batches .*--task lm only"),
    ("eval batches 0", text_run("--eval-batches", "0"), r"--eval-batches .*Received: eval_batches=0"),
    ("keep best without lm", flags("--keep-best"), r"--keep-best .*--task lm only"),
    ("keep best without held-out text", text_run("--keep-best", "--val-split", "0"), r"--keep-best .*keep_best needs held-out text to evaluate, but --val-split 0 holds none out"),
    ("eval every without held-out text", text_run("--eval-every", "5", "--val-split", "0"), r"--eval-every .*eval_every needs held-out text"),
    ("min lr above the peak", flags("--min-learning-rate", "0.1", "--learning-rate", "0.01"), r"--min-learning-rate .*min_learning_rate must be at most the peak learning_rate \(--learning-rate\) .*Received: min_learning_rate=0\.1, learning_rate=0\.01"),
    ("min lr negative", flags("--min-learning-rate=-1e-5"), r"--min-learning-rate .*min_learning_rate=-1e-05"),
    ("beta1 1", flags("--beta1", "1"), r"--beta1 .*\[0, 1\).*Received: beta1=1"),
    ("beta2 nan", flags("--beta2", "nan"), r"--beta2 .*beta2=nan"),
    ("adam epsilon 0", flags("--adam-epsilon", "0"), r"--adam-epsilon .*Received: adam_epsilon=0"),
    ("beta2 with sgd", flags("--optimizer", "sgd", "--beta2", "0.95"), r"--beta2 .*beta2 applies to adam and adamw, not --optimizer sgd\. Received: beta2=0\.95"),
    ("weight decay on norms", flags("--weight-decay-on", "norms"), r"--weight-decay-on .*Received: weight_decay_on='norms'"),
    ("weight decay on with adam", flags("--optimizer", "adam", "--weight-decay-on", "all"), r"--weight-decay-on .*weight_decay_on applies to adamw, not --optimizer adam"),
    ("windows without lm", flags("--windows", "random"), r"--windows .*--task lm only"),
    ("windows shuffled", text_run("--windows", "shuffled"), r"--windows .*Received: windows='shuffled'"),
    ("feed forward swish", text_run("--feed-forward", "swish"), r"--feed-forward .*Received: feed_forward='swish'"),
    ("bias maybe", text_run("--bias", "maybe"), r"--bias .*true or false\. Received: bias='maybe'"),
    ("bias without lm", flags("--bias", "false"), r"--bias .*--task lm only"),
    ("init std 0", text_run("--init-std", "0"), r"--init-std .*Received: init_std=0"),
    ("init std 2", text_run("--init-std", "2"), r"--init-std .*Received: init_std=2"),
    ("jit with two replicas", flags("--jit-compile", "--strategy", "mirrored", "--devices", "/cpu:0,/cpu:1"), r"--jit-compile .*the 'mirrored' strategy runs 2.*Received: jit_compile=True"),
    ("yaml keep best string", yaml_config("keep_best: maybe\n"), r"--keep-best .*keep_best='maybe'"),
]  # fmt: skip


def fifo(tmp_path, name):
    path = tmp_path / name
    if not path.exists():
        os.mkfifo(path)
    return str(path)


def write(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def data_file(name, content, *extra):
    def arguments(tmp_path):
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return ["--data", str(path), "--logdir", str(tmp_path / "run"), *extra]

    return arguments


def _with_val(tmp_path):
    (tmp_path / "v.csv").write_text("text,label\nmeh,meh\n")
    arguments = data_file("t.csv", "text,label\na,pos\nb,neg\n")(tmp_path)
    return [*arguments, "--val-data", str(tmp_path / "v.csv")]


def _split_and_val(tmp_path):
    arguments = data_file("t.csv", "text,label\na,pos\n", "--val-split", "0.2")(
        tmp_path
    )
    return [*arguments, "--val-data", str(tmp_path / "t.csv")]


DATA_CASES = [
    ("all texts empty", data_file("t.csv", 'text,label\n"",0\n" ",1\n'), r"t\.csv: every text is empty"),
    ("no words", data_file("t.csv", "text,label\n!!,0\n?,1\n"), r"t\.csv: the texts hold no words"),
    ("label 2**31", data_file("t.csv", "text,label\na,0\nb,2147483648\n"), r"t\.csv, line 3: the largest label is 2147483648 .* Renumber them\. "),
    ("label 1000000", data_file("t.csv", "text,label\na,0\nb,1000000\n"), r"line 3: the largest label is 1000000 .* Renumber them\. "),
    ("label 40 of 2", data_file("t.csv", "text,label\na,0\nb,40\n"), r"line 3: .* give --num-classes 41 if that is meant"),
    ("label above --num-classes", data_file("t.csv", "text,label\na,0\nb,3\n", "--num-classes", "3"), r"line 3: label 3 is not below num_classes"),
    ("bad utf-8 data", data_file("t.csv", b"text,label\na,0\ncaf\xe9,1\n"), r"t\.csv, line 3, byte 18: not UTF-8"),
    ("negative label", data_file("t.jsonl", '{"text": "a", "label": -1}\n'), r"t\.jsonl, line 1: the label"),
    ("ids and names mixed", data_file("t.csv", "text,label\na,pos\nb,1\n"), r"t\.csv, line 3: the labels mix class ids and names .*Received: label=1$"),
    ("val name unknown", _with_val, r"v\.csv, line 2: label 'meh' is not a class"),
    ("names and --num-classes", data_file("t.csv", "text,label\na,pos\nb,neg\n", "--num-classes", "3"), r"t\.csv: the labels are 2 names \(neg, pos\)"),
    ("val split 1", data_file("t.csv", "text,label\na,pos\n", "--val-split", "1"), r"--val-split \(config key val_split\): `val_split` must be"),
    ("val split and val data", _split_and_val, r"--val-split \(config key val_split\): .*when no val_data"),
    ("unclosed quote", data_file("t.csv", 'text,label\na,0\n"b,1\nc,0\nd,1\n'), r"t\.csv, line 3: a quoted field opened on this line is never closed"),
    ("label 1_0", data_file("t.csv", "text,label\na,0\nb,1_0\n"), r"t\.csv, line 3: the label is digits with underscores"),
]  # fmt: skip


USER_MODULE = os.path.join(REPO, "tests", "training", "user_module.py")


def own(model_fn, data_fn, *extra):
    """`--model-fn`/`--data-fn` flags naming functions of the tests' user module."""

    def arguments(tmp_path):
        argv = ["--logdir", str(tmp_path / "run"), *extra]
        if model_fn:
            argv += ["--model-fn", f"{USER_MODULE}:{model_fn}"]
        if data_fn:
            argv += ["--data-fn", f"{USER_MODULE}:{data_fn}"]
        return argv

    return arguments


FAULTS_MODULE = os.path.join(REPO, "tests", "training", "user_faults.py")


def faulty(model_fn, data_fn="array_data"):
    """Flags naming functions of the tests' misbehaving user module."""

    def arguments(tmp_path):
        return [
            "--logdir", str(tmp_path / "run"),
            "--model-fn", f"{FAULTS_MODULE}:{model_fn}",
            "--data-fn", f"{FAULTS_MODULE}:{data_fn}",
        ]  # fmt: skip

    return arguments


def users_files(model_file, **files):
    """`--model-fn MODEL_FILE:build` of a user's directory holding `files`."""

    def arguments(tmp_path):
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        return [
            "--logdir", str(tmp_path / "run"),
            "--model-fn", f"{tmp_path / model_file}:build",
            "--data-fn", f"{FAULTS_MODULE}:array_data",
        ]  # fmt: skip

    return arguments


TINY = ["--num-layers", "1", "--d-model", "16", "--num-heads", "2", "--max-len", "8"]
TINY += ["--num-examples", "64", "--steps-per-epoch", "1", "--no-export"]
SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"


def linked(relative, data=False, dangling=False):
    """A tiny run whose `run/<relative>` is a symlink to another file.

    In a shared directory anyone may plant such a link; the run must refuse
    it and leave the link's target as it was (`secret`; `missing` must not
    appear).
    """

    def arguments(tmp_path):
        secret = tmp_path / "secret"
        secret.write_text(SECRET)
        link = tmp_path / "run" / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(tmp_path / "missing" if dangling else secret)
        argv = [*TINY, "--logdir", str(tmp_path / "run")]
        if data:
            return argv + ["--data", str(write(tmp_path, TEXTS, "train.csv"))]
        if relative == "train.log":
            argv += ["--log-file", str(link)]
        return argv + ["--task", "sorted"]

    return arguments


OWN_MODEL_CASES = [
    ("missing module", lambda t: ["--model-fn", "no_such_module_x:build", "--data-fn", "no_such_module_x:data", "--logdir", str(t / "run")], r"--model-fn \(config key model_fn\): no module named 'no_such_module_x'"),
    ("missing function", own("build_everything", "array_data"), r"--model-fn .* has no function 'build_everything'"),
    ("model without data", own("compiled_model", None), r"--data-fn .* go together"),
    ("model and a task", own("compiled_model", "array_data", "--task", "sorted"), r"--task .* leave out task and data"),
    ("returns no model", own("no_model", "array_data"), r"--model-fn .* returned NoneType, not a Keras model"),
    ("model_fn sys.exit(0)", faulty("exit_0_model"), r"--model-fn \(config key model_fn\): model_fn .*user_faults\.py:exit_0_model called sys\.exit\(0\) at .*user_faults\.py, line \d+"),
    ("model_fn sys.exit(3)", faulty("exit_3_model"), r"--model-fn .*exit_3_model called sys\.exit\(3\) at .*user_faults\.py, line \d+"),
    ("data_fn sys.exit(text)", faulty("dense_model", "exit_text_data"), r"--data-fn .*exit_text_data called sys\.exit\('no data here'\)"),
    ("data_fn raise SystemExit", faulty("dense_model", "exit_none_data"), r"--data-fn .*exit_none_data called sys\.exit\(None\)"),
    ("sys.exit at import", users_files("my_model.py", **{"my_model.py": "import sys\nsys.exit(3)\n"}), r"--model-fn .*importing .*my_model\.py for model_fn called sys\.exit\(3\) at .*my_model\.py, line 2"),
    ("dataset not batched", faulty("dense_model", "unbatched_data"), r"data_fn's train dataset yields single examples, not batches \(element_spec \('float32\[4\]', 'int32\[\]'\)\): batch it in data_fn, e\.g\. dataset\.batch\(32\)"),
    ("dataset unbatched", faulty("dense_model", "unbatched_again_data"), r"data_fn's train dataset yields single examples, not batches"),
    ("validation not batched", faulty("dense_model", "unbatched_validation_data"), r"data_fn's validation dataset yields single examples"),
    ("label 7 at example 70", faulty("dense_model", "late_bad_label_arrays"), r"data_fn's training labels hold 7 \(example 70\), outside the valid range \[0, 2\)"),
    ("validation label -1", faulty("dense_model", "bad_validation_label_arrays"), r"data_fn's validation labels hold -1 \(example 10\), outside the valid range \[0, 2\)"),
    ("pairs of pairs", faulty("dense_model", "ambiguous_pairs_data"), r"data_fn returned two pairs of equally long arrays .*\{'train': \.\.\., 'validation': \.\.\.\} for the first"),
    ("tfnorm.py beside the module", users_files("my_model.py", **{"my_model.py": "def build():\n    pass\n", "tfnorm.py": ""}), r"--model-fn .*/tfnorm\.py shadows the tfnorm package.* Rename it"),
    ("a model module named tfnorm.py", users_files("tfnorm.py", **{"tfnorm.py": "def build():\n    pass\n"}), r"--model-fn .*/tfnorm\.py shadows the tfnorm package"),
    ("uncompiled, no loss", own("subclassed_model", "array_data"), r"--loss .* not compiled"),
    ("data of the wrong shape", own("compiled_model", "wrong_shape_data"), r"data_fn's batches cannot be fed to model_fn's model"),
    ("labels outside the outputs", own("compiled_model", "labels_outside_outputs"), r"data_fn's labels do not fit model_fn's outputs"),
    ("data of no known form", own("compiled_model", "not_data"), r"data_fn must return .* Received for train: str"),
    ("unknown loss", own("subclassed_model", "array_data", "--loss", "hinge_of_doom"), r"unknown Keras loss"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arguments, expected",
    [pytest.param(a, e, id=name) for name, a, e in OWN_MODEL_CASES],
)
def test_bad_model_and_data_functions_are_one_line_exit_2(
    tmp_path, capsys, arguments, expected
):
    status, error = run_train(tmp_path, capsys, arguments)
    assert_one_line_error(status, error, expected)
    assert not (tmp_path / "run").exists()


def test_a_raising_model_fn_is_one_line_then_the_users_traceback(tmp_path, capsys):
    status, error = run_train(tmp_path, capsys, own("raising_model", "array_data"))
    first, rest = error.split("\n", 1)
    assert status == 2
    assert re.match(
        r"tfnorm train: error: --model-fn \(config key model_fn\): model_fn "
        r".*user_module.py:raising_model raised RuntimeError: the GPU is on fire",
        first,
    ), first
    assert rest.startswith("Traceback (most recent call last):")
    assert "user_module.py" in rest and "tfnorm/training" not in rest
    assert not (tmp_path / "run").exists()


def log_file_is(how):
    """A run whose --log-file is its own data file (spelled another way)."""

    def arguments(tmp_path):
        data = write(tmp_path, TEXTS, "train.csv")
        (tmp_path / "val.csv").write_text(TEXTS)
        log = {
            "the same path": str(data),
            "dot spelling": os.path.join(str(tmp_path), ".", "train.csv"),
            "val data": str(tmp_path / "val.csv"),
        }.get(how)
        if how == "a hard link":
            log = str(tmp_path / "hard.log")
            if not os.path.exists(log):
                os.link(data, log)
        argv = [*TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
        return argv + ["--val-data", str(tmp_path / "val.csv"), "--log-file", log]

    return arguments


TEXTS = "text,label\nthe cat,0\na dog,1\n"

OWN_CODE = """
import numpy as np
import tensorflow as tf


def build():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def data():
    return np.ones((8, 4), "float32"), np.zeros(8, "int32")
"""


def log_file_is_code(which):
    """A run whose --log-file is its --config file or its own code's module."""

    def arguments(tmp_path):
        model = write(tmp_path, OWN_CODE, "own_model.py")
        data = write(tmp_path, OWN_CODE, "own_data.py")
        config = write(tmp_path, f"logdir: {tmp_path / 'run'}\n")
        log = {"config": config, "model_fn": model, "data_fn": data}.get(which)
        if which == "data_fn":  # spelled as another name of the same file
            log = tmp_path / "hard.log"
            if not log.exists():
                os.link(data, log)
        if which == "link":
            log = tmp_path / "linked.log"
            if not log.is_symlink():
                log.symlink_to(tmp_path / "secret")
        return [
            *["--config", str(config), "--log-file", str(log), "--no-export"],
            *["--model-fn", f"{model}:build", "--data-fn", f"{data}:data"],
        ]

    return arguments


# Files a run writes, planted as links: exit 2 naming the path, the target untouched.
LINK_CASES = [
    ("lock symlink", linked("checkpoints/tfnorm.lock"), r"--checkpoint-dir .*checkpoints/tfnorm\.lock is a symbolic link"),
    ("lock dangling symlink", linked("checkpoints/tfnorm.lock", dangling=True), r"checkpoints/tfnorm\.lock is a symbolic link"),
    ("logdir lock symlink", linked("tfnorm.lock"), r"--logdir .*run/tfnorm\.lock is a symbolic link"),
    ("summary symlink", linked("summary.json"), r"--logdir .*summary\.json is a symbolic link"),
    ("run config symlink", linked("checkpoints/run_config.json"), r"--checkpoint-dir .*run_config\.json is a symbolic link"),
    ("state file symlink", linked("checkpoints/checkpoint"), r"--checkpoint-dir .*checkpoints/checkpoint is a symbolic link"),
    ("vocabulary symlink", linked("vocabulary.json", data=True), r"--logdir .*run/vocabulary\.json is a symbolic link"),
    ("checkpoint vocabulary symlink", linked("checkpoints/vocabulary.json", data=True), r"--checkpoint-dir .*checkpoints/vocabulary\.json is a symbolic link"),
    ("log file symlink", linked("train.log"), r"--log-file .*train\.log is a symbolic link"),
    ("log file dangling symlink", linked("train.log", dangling=True), r"--log-file .*train\.log is a symbolic link"),
]  # fmt: skip

# --log-file naming a data file would append progress lines to the dataset.
LOG_IS_DATA_CASES = [
    ("log file is data", log_file_is("the same path"), r"--log-file .*the same file as data \(--data\)"),
    ("log file is ./data", log_file_is("dot spelling"), r"--log-file .*the same file as data \(--data\)"),
    ("log file is a hard link of data", log_file_is("a hard link"), r"--log-file .*the same file as data \(--data\)"),
    ("log file is val data", log_file_is("val data"), r"--log-file .*the same file as val_data \(--val-data\)"),
    ("log file is the config", log_file_is_code("config"), r"--log-file .*the same file as the config file \(--config\)"),
    ("log file is the model module", log_file_is_code("model_fn"), r"--log-file .*the same file as model_fn \(--model-fn\); .* your code"),
    ("log file is the data module", log_file_is_code("data_fn"), r"--log-file .*the same file as data_fn \(--data-fn\)"),
    ("own model's log file symlink", log_file_is_code("link"), r"--log-file .*linked\.log is a symbolic link"),
]  # fmt: skip


def test_a_log_file_that_is_the_module_named_by_name_is_refused(
    tmp_path, capsys, monkeypatch
):
    write(tmp_path, OWN_CODE, "own_code_by_name.py")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    status, error = run_train(
        tmp_path,
        capsys,
        lambda t: [
            *["--model-fn", "own_code_by_name:build", "--no-export"],
            *["--data-fn", "own_code_by_name:data", "--logdir", str(t / "run")],
            *["--log-file", "./own_code_by_name.py"],
        ],
    )
    assert_one_line_error(status, error, r"--log-file .*same file as model_fn")
    assert snapshot(tmp_path) == before


def snapshot(tmp_path):
    """Every path under `tmp_path` with its bytes (None for a directory or link)."""
    found = {}
    for root, directories, names in os.walk(tmp_path):
        for name in directories + names:
            path = os.path.join(root, name)
            plain = os.path.isfile(path) and not os.path.islink(path)
            found[path] = open(path, "rb").read() if plain else None
    return found


@pytest.mark.parametrize(
    "arguments, expected",
    [pytest.param(a, e, id=name) for name, a, e in LINK_CASES + LOG_IS_DATA_CASES],
)
def test_a_linked_run_file_is_refused_and_nothing_is_written(
    tmp_path, capsys, arguments, expected
):
    arguments(tmp_path)
    before = snapshot(tmp_path)
    status, error = run_train(tmp_path, capsys, arguments)
    assert_one_line_error(status, error, expected)
    assert "secret" not in error.replace(str(tmp_path / "secret"), "")
    assert snapshot(tmp_path) == before


def run_train(tmp_path, capsys, arguments):
    argv = ["train", *arguments(tmp_path), "--histogram-every", "0"]
    try:
        status = main(argv)
    except SystemExit as exit:
        status = exit.code
    return status, capsys.readouterr().err


def assert_one_line_error(status, error, expected):
    assert status == 2, error
    assert error.count("\n") == 1 and error.endswith("\n"), error
    assert error.startswith("tfnorm train: error: "), error
    assert "Traceback" not in error
    assert re.search(expected, error), error


@pytest.mark.parametrize(
    "arguments, expected",
    [pytest.param(a, e, id=name) for name, a, e in CONFIG_CASES + DATA_CASES],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, arguments, expected):
    status, error = run_train(tmp_path, capsys, arguments)
    assert_one_line_error(status, error, expected)


@pytest.mark.parametrize(
    "arguments", [pytest.param(a, id=name) for name, a, _ in CONFIG_CASES]
)
def test_a_rejected_setting_creates_nothing(tmp_path, capsys, arguments):
    before = sorted(p.name for p in tmp_path.iterdir())
    arguments(tmp_path)  # the row's own input files
    made = sorted(p.name for p in tmp_path.iterdir())
    run_train(tmp_path, capsys, arguments)
    assert sorted(p.name for p in tmp_path.iterdir()) == made, before
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize(
    "arguments", [pytest.param(a, id=name) for name, a, _ in DATA_CASES]
)
def test_a_rejected_data_file_creates_nothing(tmp_path, capsys, arguments):
    run_train(tmp_path, capsys, arguments)
    assert not (tmp_path / "run").exists()


def test_yaml_learning_rate_1e_3_is_accepted(tmp_path, capsys):
    # YAML 1.1 reads `1e-3` (no dot) as a string; it is a number to users.
    path = write(tmp_path, "task: sorted\nlearning_rate: 1e-3\nseed: 4294967295\n")
    assert main(["train", "--config", str(path), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["learning_rate"] == 0.001 and printed["seed"] == 2**32 - 1


def test_data_file_with_byte_order_mark_trains(tmp_path, capsys):
    data = tmp_path / "train.csv"
    data.write_bytes("\ufefftext,label\nthe cat,0\na dog,1\n".encode())
    argv = ["train", "--data", str(data), "--logdir", str(tmp_path / "run")]
    argv += ["--max-len", "4", "--num-layers", "1", "--d-model", "8"]
    argv += ["--num-heads", "2", "--steps-per-epoch", "1", "--batch-size", "2"]
    argv += ["--histogram-every", "0", "--no-export"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["data"]["num_classes"] == 2


def test_the_command_prints_one_line_and_no_traceback(tmp_path):
    # A real process, started as the console script (a file named `tfnorm`):
    # the one line is all a user sees, and a rejected setting needs no
    # TensorFlow at all.
    script = tmp_path / "tfnorm"
    script.write_text(
        "import sys\nfrom tfnorm.cli.main import main\nsys.exit(main())\n"
    )
    env = dict(
        os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    result = subprocess.run(
        [sys.executable, str(script), "train", "--task", "sorted"]
        + ["--seed", "4294967296", "--logdir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "tfnorm train: error: --seed (config key seed): `seed` must be an integer "
        "in [0, 4294967295]. Received: seed=4294967296\n"
    )
    assert not (tmp_path / "run").exists()


def test_a_damaged_vocabulary_beside_a_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    data = write(tmp_path, TEXTS, "train.csv")
    argv = ["train", *TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
    argv += ["--histogram-every", "0"]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    vocabulary = tmp_path / "run" / "checkpoints" / "vocabulary.json"
    vocabulary.write_text('["the", "cat"')  # cut short
    status, error = run_train(tmp_path, capsys, lambda _: argv[1:])
    assert_one_line_error(
        status, error, r"--checkpoint-dir .*checkpoints/vocabulary\.json cannot be read"
    )
    assert vocabulary.read_text() == '["the", "cat"'


@pytest.mark.parametrize("release", ["no run_identity", "run_config []"])
def test_checkpoints_of_the_previous_release_do_not_resume_on_changed_data(
    tmp_path, capsys, release
):
    # The previous release wrote no data hash: a changed file resumed with
    # every word an unknown token.
    data = write(tmp_path, TEXTS, "train.csv")
    argv = [*TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
    assert main(["train", *argv, "--histogram-every", "0"]) == 0
    capsys.readouterr()
    run_config = tmp_path / "run" / "checkpoints" / "run_config.json"
    saved = json.loads(run_config.read_text())
    del saved["run_identity"]
    run_config.write_text(json.dumps(saved) if release == "no run_identity" else "[]")
    data.write_text("text,label\nquite other words,0\nnothing alike,1\n")
    status, error = run_train(tmp_path, capsys, lambda _: argv)
    expected = {
        "no run_identity": r"--data .*record no SHA-256 of their training file .*"
        r"another checkpoint_dir \(--checkpoint-dir\)",
        "run_config []": r"--checkpoint-dir .*run_config\.json holds a JSON list.*"
        r"another checkpoint_dir \(--checkpoint-dir\) to start a new run",
    }[release]
    assert_one_line_error(status, error, expected)


def test_a_data_path_spelled_otherwise_resumes_the_same_run(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, TEXTS, "train.csv")
    argv = [*TINY, "--logdir", "run", "--histogram-every", "0"]
    assert main(["train", *argv, "--data", "./train.csv", "--epochs", "1"]) == 0
    capsys.readouterr()
    argv += ["--data", "train.csv", "--epochs", "2", "--vocab-size", "20000"]
    argv += ["--epsilon", "1e-6", "--norm", "layernorm"]
    assert main(["train", *argv]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "resumed from step 1" in out
    assert "resuming with changed settings: epsilon None -> 1e-06, epochs 1 -> 2" in out


@pytest.mark.parametrize("which", ["data", "vocabulary"])
def test_an_unreadable_file_is_one_line_exit_2(tmp_path, capsys, monkeypatch, which):
    # chmod 000 does not stop root: a refused open stands in for it.
    data = write(tmp_path, TEXTS, "train.csv")
    argv = [*TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
    if which == "vocabulary":
        assert main(["train", *argv, "--histogram-every", "0"]) == 0
        capsys.readouterr()
    refused = {
        "data": str(data),
        "vocabulary": str(tmp_path / "run" / "checkpoints" / "vocabulary.json"),
    }[which]
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == refused:
            raise PermissionError(13, "Permission denied", refused)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    status, error = run_train(tmp_path, capsys, lambda _: argv)
    expected = {
        "data": r"--data .*`data` cannot be read: Permission denied",
        "vocabulary": r"--checkpoint-dir .*vocabulary\.json cannot be read",
    }[which]
    assert_one_line_error(status, error, expected)


# A resumed text run's saved vocabulary (checkpoints/vocabulary.json), damaged:
# exit 2 naming the checkpoint directory, before anything is restored.
RESUME_VOCABULARY_CASES = [
    ("vocabulary []", "[]", r"--checkpoint-dir .*vocabulary\.json cannot be read: it holds no tokens"),
    ("vocabulary repeats a token", '["the", "cat", "the"]', r"--checkpoint-dir .*token 2 'the' repeats token 0"),
    ("vocabulary has an empty token", '["the", "", "cat"]', r"--checkpoint-dir .*token 1 is ''"),
    ("vocabulary has [UNK]", '["[UNK]", "the"]', r"--checkpoint-dir .*token 0 is '\[UNK\]'"),
    ("vocabulary of numbers", "[1, 2]", r"--checkpoint-dir .*not a JSON list of tokens"),
]  # fmt: skip


@pytest.mark.parametrize(
    "text, expected",
    [pytest.param(t, e, id=name) for name, t, e in RESUME_VOCABULARY_CASES],
)
def test_a_damaged_saved_vocabulary_stops_the_resume_in_one_line(
    tmp_path, capsys, text, expected
):
    data = write(tmp_path, TEXTS, "train.csv")
    argv = [*TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
    arguments = lambda tmp_path: argv  # noqa: E731
    status, error = run_train(tmp_path, capsys, arguments)
    assert status == 0, error
    saved = tmp_path / "run" / "checkpoints" / "vocabulary.json"
    saved.write_text(text)
    before = snapshot(tmp_path / "run" / "checkpoints")
    status, error = run_train(tmp_path, capsys, arguments)
    assert_one_line_error(status, error, expected)
    assert snapshot(tmp_path / "run" / "checkpoints") == before


def test_a_classifier_flag_with_model_fn_is_refused_naming_the_flag(tmp_path, capsys):
    def arguments(_):
        return ["--model-fn", "m:build", "--data-fn", "m:load", "--num-layers", "4"]

    status, error = run_train(tmp_path, capsys, arguments)
    assert_one_line_error(
        status,
        error,
        r"--num-layers \(config key num_layers\): num_layers applies to "
        r"tfnorm's classifier and the language model of --task lm only; a "
        r"model_fn model does not read it",
    )


# Resuming with a vocabulary of another size: the restore failed naming only
# the checkpoint ("ckpt-1 belongs to another model"), or the identity check
# said "vocab_size: checkpoint None, now 4". Each names the vocabulary
# (file or setting) and both sizes, before anything is restored.
RESUME_VOCABULARY_SIZE_CASES = [
    ("vocabulary.json a token short", [], r"--checkpoint-dir .*checkpoints/vocabulary\.json gives a vocabulary of 5 tokens .*trained with 6"),
    ("--vocab-size below the vocabulary", ["--vocab-size", "4"], r"--vocab-size .*a vocabulary of 6 tokens .*vocab_size=4; resume without vocab_size \(--vocab-size\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "extra, expected",
    [pytest.param(x, e, id=name) for name, x, e in RESUME_VOCABULARY_SIZE_CASES],
)
def test_a_vocabulary_of_another_size_is_refused_naming_it(
    tmp_path, capsys, extra, expected
):
    data = write(tmp_path, TEXTS, "train.csv")
    argv = [*TINY, "--data", str(data), "--logdir", str(tmp_path / "run")]
    status, error = run_train(tmp_path, capsys, lambda _: argv)
    assert status == 0, error
    saved = tmp_path / "run" / "checkpoints" / "vocabulary.json"
    if not extra:
        saved.write_text(json.dumps(json.loads(saved.read_text())[:-1]))
    before = snapshot(tmp_path / "run" / "checkpoints")
    status, error = run_train(tmp_path, capsys, lambda _: [*argv, *extra])
    assert_one_line_error(status, error, expected)
    assert snapshot(tmp_path / "run" / "checkpoints") == before
