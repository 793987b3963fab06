"""`bench/norm_share.py` runs end to end at tiny widths and writes its
table (a smoke test, no figure) with its noise-floor control, counts the operations `bench/norm_flops.py`
counts, and refuses a width that is not a whole number of heads."""

from __future__ import annotations

import json

import pytest

from bench import decoder, norm_flops, norm_share


@pytest.fixture
def tiny(monkeypatch):
    for name, value in {"LAYERS": 1, "VOCAB": 40, "SEQ": 8}.items():
        monkeypatch.setattr(decoder, name, value)
    monkeypatch.setattr(norm_share, "HEAD_SIZE", 8)
    # One preset and graph mode keep the traced steps few: the other
    # preset is the same code, and XLA the same step with jit_compile
    # (tests/bench/test_decoder.py compiles it).
    monkeypatch.setattr(norm_share, "PRESETS", {"llama": True})


def test_norm_share_writes_a_row_per_width_preset_and_mode(tmp_path, tiny):
    table, raw = tmp_path / "s.md", tmp_path / "s.json"
    norm_share.main(
        ["--widths", "8", "16", "--batch", "2", "--rounds", "2", "--repeats", "1"]
        + ["--markdown", str(table), "--json", str(raw)]
    )
    text = table.read_text()
    for width in (8, 16):
        for preset in norm_share.PRESETS:
            assert f"| {width} | {preset} | graph |" in text
    cells = json.loads(raw.read_text())["widths"]
    assert len(cells) == 2 * len(norm_share.PRESETS)
    for cell in cells:
        (repetition,) = cell["seconds"]
        assert {n: len(t) for n, t in repetition.items()} == {
            "rms": 2,
            "layer": 2,
            "identity": 2,
            norm_share.NULL: 2,
        }
        assert set(cell["measured"]) == {"rms", "layer", norm_share.NULL}
        assert 0 < cell["counted"]["rms"] < cell["counted"]["layer"] < 1


def test_counted_shares_are_norm_flops_at_the_width(tiny):
    shares = norm_share.counted_shares(16, gated=True)
    parts = norm_flops.decoder_flops_per_token(
        d_model=16,
        num_layers=1,
        num_heads=2,
        dff=64,
        vocab_size=40,
        context=8,
        gated=True,
        norm="layer",
    )
    assert shares["layer"] == parts["norms"] / parts["total"]
    # Wider, the products grow as d^2 and the norms as d: the share falls.
    assert norm_share.counted_shares(64, gated=True)["layer"] < shares["layer"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--widths", "256", "300"],
            "--widths must be positive multiples of the head size 64; received 300",
        ),
        (["--widths", "0"], "received 0"),
        (["--batch", "0"], "--batch, --rounds and --repeats must be at least 1"),
        (["--warmup", "0"], "--warmup must be at least 1"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(flags, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        norm_share.parse_args(flags)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
