"""The wire formats of ``--comm-precision``: sizes, what a receiver gets, and int8's keyed stochastic
rounding (unbiased, the same for a row whoever sends it, repeatable), each checked against an
independent statement of the rule (torch's own casts, a hand-made integer rounding)."""

import pytest
import torch

from fullgraph.comm.precision import PRECISIONS, decode_rows, encode_rows, round_rows, row_bytes, wire_site
from fullgraph.ops.dropout import keyed_dropout


def _rows(n=64, width=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, generator=g) * torch.logspace(-3, 3, n)[:, None]


@pytest.mark.parametrize("precision, per_row", [("fp32", 4 * 37), ("bf16", 2 * 37), ("fp16", 2 * 37), ("int8", 37 + 4)])
def test_encoded_rows_have_the_stated_size(precision, per_row):
    x = _rows()
    b = encode_rows(x, precision)
    assert b.dtype == torch.uint8 and tuple(b.shape) == (64, per_row) == (64, row_bytes(37, precision))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_float_formats_round_as_torch_casts(precision):
    x = _rows()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    assert torch.equal(decode_rows(encode_rows(x, precision), precision, 37), x.to(dtype).float())
    assert torch.equal(round_rows(x, precision), x.to(dtype).float())


def test_int8_rounds_to_nearest_outside_a_keyed_step():
    x = _rows()
    scale = x.abs().amax(dim=1, keepdim=True) / 127
    expected = torch.round(x / scale).clamp(-127, 127) * scale
    got = round_rows(x, "int8", rows=torch.arange(64), site=wire_site(1, False))
    assert torch.allclose(got, expected, rtol=0, atol=1e-6 * scale.max().item())
    assert (got - x).abs().le(scale / 2 + 1e-6 * scale).all()  # at most half a step off
    assert got.abs().amax(dim=1).sub(x.abs().amax(dim=1)).abs().le(1e-5 * x.abs().amax(dim=1)).all()


def test_int8_zero_rows_and_empty_messages():
    x = torch.zeros(3, 5)
    assert torch.equal(round_rows(x, "int8"), x)
    assert encode_rows(torch.zeros(0, 5), "int8").shape == (0, 9)


def test_int8_stochastic_rounding_is_unbiased_keyed_and_repeatable():
    x = torch.full((1, 4000), 0.3)
    x[0, -1] = 127.0  # the row's scale is exactly 1
    rows = torch.tensor([12345])
    with keyed_dropout(seed=7, epoch=3):
        a = round_rows(x, "int8", rows=rows, site=wire_site(2, False))
        b = round_rows(x, "int8", rows=rows, site=wire_site(2, False))
        other_site = round_rows(x, "int8", rows=rows, site=wire_site(2, True))
        other_row = round_rows(x, "int8", rows=rows + 1, site=wire_site(2, False))
    with keyed_dropout(seed=7, epoch=4):
        other_epoch = round_rows(x, "int8", rows=rows, site=wire_site(2, False))
    v = a[0, :3999]
    assert set(v.unique().tolist()) <= {0.0, 1.0}  # only the two neighbours of 0.3
    assert abs(v.mean().item() - 0.3) < 4 * (0.3 * 0.7 / 3999) ** 0.5  # unbiased, within 4 s.d.
    assert torch.equal(a, b)
    assert not torch.equal(a, other_site) and not torch.equal(a, other_row) and not torch.equal(a, other_epoch)


def test_int8_a_row_rounds_the_same_in_any_message():
    x = _rows(10, 16)
    ids = torch.arange(100, 110)
    with keyed_dropout(seed=1, epoch=1):
        whole = round_rows(x, "int8", rows=ids, site=wire_site(0, False))
        pick = torch.tensor([7, 2, 5])
        part = round_rows(x[pick], "int8", rows=ids[pick], site=wire_site(0, False))
    assert torch.equal(whole[pick], part)


def test_a_column_slice_draws_its_own_columns_and_phases_draw_apart():
    """The SpMM layouts send column slices of rows: slice [a, b) with ``col0 = a`` draws the uniforms of
    columns a..b-1 of the whole row, not those of columns 0..b-a-1; each phase of a product is a site."""
    from fullgraph.ops.dropout import DropoutKey, keyed_uniform

    key, ids, site = DropoutKey(3, 2), torch.arange(40, 52), wire_site(2, True)
    whole = keyed_uniform(ids, 24, key, site)
    assert torch.equal(keyed_uniform(ids, 8, key, site, col0=16), whole[:, 16:])
    assert not torch.equal(keyed_uniform(ids, 8, key, site), whole[:, 16:])
    sites = {wire_site(layer, back, phase) for layer in range(64) for back in (False, True) for phase in range(5)}
    assert len(sites) == 64 * 2 * 5 and max(sites) < 0  # distinct, and never a dropout site


def test_bad_precision_and_bad_rows_are_refused():
    with pytest.raises(ValueError, match="bf16"):
        row_bytes(4, "fp8")
    with pytest.raises(ValueError, match="bytes"):
        decode_rows(torch.zeros(2, 5, dtype=torch.uint8), "int8", 4)
    assert PRECISIONS[0] == "fp32"
