"""A rank lets go of gloo when it closes its communicator: ``destroy_process_group`` alone leaves each
group's worker and transport threads running until the interpreter's teardown, where a worker that
drops a finished collective's tensors asks for a GIL that is going away, and a rank that trained
well ends with SIGABRT ("terminate called without an active exception"; CI saw it once in a
graph-parallel link run). The thread names are gloo's own (``pt_gloo_runloop``, ``gloo_tcp_loop``)."""

import pytest
import torch

from tests.distributed import run_ranks


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/task")
def test_closing_the_communicator_joins_gloo_threads(tmp_path):
    got = run_ranks("closed_threads", 2, {}, tmp_path)
    assert torch.equal(got["rows"], torch.tensor([[0.0] * 3, [1.0] * 3]))  # the lanes carried rows first
    assert "pt_gloo_runloop" in got["before"] and "gloo_tcp_loop" in got["before"], got["before"]
    assert got["after"] == [], got["after"]
