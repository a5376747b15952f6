"""The restricted unpickler: real data loads, anything that could run code is refused unexecuted."""

import collections
import os
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from fullgraph.data.safe_pickle import checked_csr, load_npz_with_objects, load_pickle, loads
from fullgraph.errors import InputError


class _Exploit:
    """Pickles to a call of ``os.system`` — the classic malicious pickle."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_refuses_os_system_reduce_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    for proto in (0, 2, 5):
        data = pickle.dumps(_Exploit(f"touch {marker}"), protocol=proto)
        with pytest.raises(InputError, match=r"'(posix|os)\.system'"):
            loads(data)
    assert not marker.exists()


def test_refuses_handwritten_global_and_builtins_eval(tmp_path):
    marker = tmp_path / "pwned"
    crafted = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    with pytest.raises(InputError, match=r"'os\.system'"):
        loads(crafted)
    with pytest.raises(InputError, match=r"'builtins\.eval'"):
        loads(b"cbuiltins\neval\n(S'1+1'\ntR.")
    with pytest.raises(InputError, match=r"'__builtin__\.getattr'"):
        loads(b"c__builtin__\ngetattr\n(c__builtin__\nlist\nS'append'\ntR.")
    path = tmp_path / "evil.pkl"
    path.write_bytes(crafted)
    with pytest.raises(InputError, match=str(path)):
        load_pickle(path)
    assert not marker.exists()


def test_refuses_non_latin1_codecs_encode():
    with pytest.raises(InputError, match="latin-1"):
        loads(b"c_codecs\nencode\n(Vabc\nVutf-16\ntR.")


def test_refuses_malicious_object_array_inside_npz(tmp_path):
    marker = tmp_path / "pwned"
    arr = np.empty((), dtype=object)
    arr[()] = _Exploit(f"touch {marker}")
    path = tmp_path / "evil.npz"
    np.savez(path, good=np.arange(3), evil=arr)
    assert load_npz_with_objects(path, ["good"])["good"].tolist() == [0, 1, 2]
    with pytest.raises(InputError, match=r"system'"):
        load_npz_with_objects(path)
    assert not marker.exists()


def test_garbage_and_missing_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="unreadable pickle"):
        loads(b"\x80\x04not a pickle at all")
    with pytest.raises(InputError, match="readable pickle file"):
        load_pickle(tmp_path / "absent.pkl")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK but not a zip")
    with pytest.raises(InputError, match="zip"):
        load_npz_with_objects(bad)
    with pytest.raises(InputError, match="no such file"):
        load_npz_with_objects(tmp_path / "absent.npz")
    good = tmp_path / "good.npz"
    np.savez(good, a=np.arange(2))
    with pytest.raises(InputError, match=r"expected arrays \['b'\]"):
        load_npz_with_objects(good, ["b"])


@pytest.mark.parametrize("proto", [2, 3, 5])
def test_round_trips_the_data_types_the_files_hold(proto):
    m = sp.random(20, 30, density=0.1, format="csr", dtype=np.float32, random_state=0)
    adj = collections.defaultdict(list, {0: [1, 2], 3: [0]})
    obj = {"m": m, "a": np.arange(6, dtype=np.int32).reshape(2, 3), "s": np.float32(1.5), "adj": adj,
           "names": np.array(["x", "yz"]), "o": np.array([{"k": 1}, None], dtype=object), "b": b"\x00\xff"}
    back = loads(pickle.dumps(obj, protocol=proto))
    assert (back["m"] != m).nnz == 0 and back["m"].dtype == np.float32
    assert back["a"].tolist() == obj["a"].tolist() and back["s"] == np.float32(1.5)
    assert back["adj"] == adj and back["adj"].default_factory is list
    assert back["names"].tolist() == ["x", "yz"] and back["o"][0] == {"k": 1} and back["b"] == b"\x00\xff"


def test_maps_removed_scipy_module_paths():
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    data = pickle.dumps(m, protocol=2)
    assert b"scipy.sparse._csr" in data
    for old in (b"scipy.sparse.csr", b"scipy.sparse"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no DeprecationWarning: the old module is never imported
            back = loads(data.replace(b"scipy.sparse._csr", old))
        assert isinstance(back, sp.csr_matrix) and (back != m).nnz == 0


def test_real_planetoid_and_graphdata_pickles(shared_data):
    graph = load_pickle(shared_data / "cora" / "ind.cora.graph")
    assert isinstance(graph, collections.defaultdict) and len(graph) == 2708
    assert sum(len(v) for v in graph.values()) == 10858
    allx = load_pickle(shared_data / "cora" / "ind.cora.allx")
    assert allx.shape == (1708, 1433) and allx.nnz == 31261
    d = load_npz_with_objects(shared_data / "amazon_computers" / "amazon_cs.npz")
    assert set(d) == {"adj_matrix", "node_attr", "node_label", "metadata"}
    assert checked_csr(d["adj_matrix"].item(), "adj").nnz == 287209
    assert len(d["metadata"].item()["class_names"]) == 10


def test_checked_csr_rejects_out_of_range_indices():
    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    m.indices[0] = 7  # what a hostile pickle could carry: SciPy's constructor never saw it
    with pytest.raises(InputError, match="well-formed"):
        checked_csr(m, "features")
    c = sp.coo_matrix(np.eye(3, dtype=np.float32))
    c.row[0] = -1
    with pytest.raises(InputError, match="outside"):
        checked_csr(c, "features")
    with pytest.raises(InputError, match="scipy sparse"):
        checked_csr(np.eye(2), "features")
