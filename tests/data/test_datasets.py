"""The dataset registry: every shared graph matches the measured statistics of shared/data/README.md.

No test touches the network: ``_fetch`` is replaced by a function that fails the test if called,
except where a test installs its own fake.
"""

import gzip
import shutil
import urllib.error
import zipfile

import pytest
import torch

from fullgraph.data import datasets
from fullgraph.data.datasets import dataset_status, get_spec, known_datasets, load_dataset, resolve_root
from fullgraph.errors import InputError


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(url, dest):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(datasets, "_fetch", refuse)


# name: nodes, directed edges after preprocessing (2 x unique undirected, no self loops), features,
# classes, (train, val, test) of split 0 / seed 0, class counts (None: not in the README)
EXPECTED = {
    "cora": (2708, 10556, 1433, 7, (140, 500, 1000), None),
    "citeseer": (3327, 9104, 3703, 6, (120, 500, 1000), None),
    "amazon-computers": (13752, 491722, 767, 10, (200, 300, 13752 - 500),
                         [436, 2142, 1414, 542, 5158, 308, 487, 818, 2156, 291]),
    "coauthor-cs": (18333, 163788, 6805, 15, (300, 450, 18333 - 750), None),
    "coauthor-physics": (34493, 495924, 8415, 5, (100, 150, 34493 - 250), [5750, 5045, 17426, 2753, 3519]),
    "squirrel": (5201, 2 * 198353, 2089, 5, (2496, 1664, 1041), [1042, 1040, 1039, 1040, 1040]),
    "squirrel-filtered": (2223, 2 * 46998, 2089, 5, (1053, 718, 452), [756, 516, 397, 321, 233]),
    "tolokers": (11758, 2 * 519000, 10, 2, (5879, 2939, 2940), [9192, 2566]),
}
FEATURE_NNZ = {"amazon-computers": 3675081, "coauthor-cs": 1092079, "coauthor-physics": 1137311, "squirrel": 93477}


@pytest.fixture(scope="module")
def loaded(shared_data):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_dataset(name, shared_data, download=False)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shared_graph_matches_measured_statistics(name, loaded):
    nodes, edges, feats, classes, split, counts = EXPECTED[name]
    g = loaded(name)
    assert g.name == name
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (nodes, edges, feats, classes)
    assert tuple(int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)) == split
    if counts is not None:
        assert torch.bincount(g.y[g.y >= 0], minlength=classes).tolist() == counts
    if name in FEATURE_NNZ:
        x = g.x.values() if g.x.layout == torch.sparse_csr else g.x
        assert int(x.count_nonzero()) == FEATURE_NNZ[name]
    # the standard structure: symmetric, simple, loop-free
    src, dst = g.edges()
    assert not bool((src == dst).any())
    n = g.num_nodes
    key = src * n + dst
    assert torch.unique(key).numel() == key.numel()
    assert torch.equal(torch.sort(key).values, torch.sort(dst * n + src).values)


def test_shchur_split_is_per_class_and_seeded(loaded, shared_data):
    g = loaded("amazon-computers")
    for m, k in ((g.train_mask, 20), (g.val_mask, 30)):
        assert torch.bincount(g.y[m], minlength=10).tolist() == [k] * 10
    again = load_dataset("amazon-computers", shared_data, download=False, seed=0)
    other = load_dataset("amazon-computers", shared_data, download=False, seed=1)
    assert torch.equal(g.train_mask, again.train_mask)
    assert not torch.equal(g.train_mask, other.train_mask)


def test_split_index_selects_a_published_split(loaded, shared_data):
    s9 = load_dataset("squirrel", shared_data, download=False, split=9)
    assert not torch.equal(s9.train_mask, loaded("squirrel").train_mask)
    with pytest.raises(InputError, match=r"split in 0\.\.9 .*got 10"):
        load_dataset("squirrel", shared_data, download=False, split=10)
    with pytest.raises(InputError, match=r"split in 0\.\.0 for dataset 'cora'"):
        load_dataset("cora", shared_data, download=False, split=1)


def test_pubmed_reports_missing_allx_with_url(shared_data):
    with pytest.raises(InputError) as e:
        load_dataset("pubmed", shared_data, download=False)
    msg = str(e.value)
    assert str(shared_data / "pubmed" / "ind.pubmed.allx") in msg
    assert "https://raw.githubusercontent.com/kimiyoung/planetoid/" in msg and "ind.pubmed.allx" in msg
    assert "ind.pubmed.tx" not in msg


def test_offline_download_failure_is_a_clear_input_error(shared_data, tmp_path, monkeypatch):
    def offline(url, dest):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(datasets, "_fetch", offline)
    root = tmp_path / "data"
    shutil.copytree(shared_data / "pubmed", root / "pubmed")
    with pytest.raises(InputError) as e:
        load_dataset("pubmed", root)
    msg = str(e.value)
    assert "download failed" in msg and "no network" in msg and "ind.pubmed.allx" in msg


def test_download_fills_an_empty_root(shared_data, tmp_path, monkeypatch):
    fetched = []

    def fake(url, dest):  # serve the shared copy as if it came from the pinned URL
        fetched.append(url)
        shutil.copy(shared_data / "cora" / url.rsplit("/", 1)[1], dest)

    monkeypatch.setattr(datasets, "_fetch", fake)
    g = load_dataset("cora", tmp_path / "fresh")
    assert g.num_edges == 10556 and len(fetched) == 8
    assert all(u.startswith("https://raw.githubusercontent.com/kimiyoung/planetoid/af6abf4") for u in fetched)
    assert (tmp_path / "fresh" / "cora" / "ind.cora.graph").is_file()


def test_download_with_wrong_bytes_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "_fetch", lambda url, dest: dest.write_bytes(b"<html>not the file</html>"))
    with pytest.raises(InputError, match="sha256"):
        load_dataset("tolokers", tmp_path)
    assert not (tmp_path / "tolokers" / "tolokers.npz").exists()


def test_changed_file_fails_verification(shared_data, tmp_path):
    shutil.copytree(shared_data / "cora", tmp_path / "cora")
    index = tmp_path / "cora" / "ind.cora.test.index"
    index.chmod(0o644)
    index.write_text(index.read_text() + "\n")  # still parses, different bytes
    with pytest.raises(InputError, match=r"sha256 .*verify=False"):
        load_dataset("cora", tmp_path, download=False)
    assert load_dataset("cora", tmp_path, download=False, verify=False).num_nodes == 2708


def _tiny_ogb_zip(path, prefix):
    with zipfile.ZipFile(path, "w") as zf:
        def put(name, text):
            zf.writestr(prefix + name, gzip.compress(text.encode()))

        put("raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,3\n")
        put("raw/node-feat.csv.gz", "".join(f"{i},1\n" for i in range(4)))
        put("raw/node-label.csv.gz", "0\n1\n0\n1\n")
        put("split/time/train.csv.gz", "0\n1\n")
        put("split/time/valid.csv.gz", "2\n")
        put("split/time/test.csv.gz", "3\n")
        zf.writestr(prefix + "RELEASE_v1.txt", "tiny")


def test_ogb_archive_download_and_extraction(tmp_path, monkeypatch):
    def fake(url, dest):
        assert url == "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip"
        _tiny_ogb_zip(dest, "arxiv/")

    monkeypatch.setattr(datasets, "_fetch", fake)
    g = load_dataset("ogbn-arxiv", tmp_path)
    assert g.name == "ogbn-arxiv" and g.num_nodes == 4 and g.num_edges == 6  # symmetrized, loop dropped
    assert (tmp_path / "ogbn_arxiv" / "raw" / "edge.csv.gz").is_file()


def test_archive_escaping_its_folder_is_refused(tmp_path, monkeypatch):
    def fake(url, dest):
        _tiny_ogb_zip(dest, "arxiv/")
        with zipfile.ZipFile(dest, "a") as zf:
            zf.writestr("arxiv/../../evil.txt", "x")

    monkeypatch.setattr(datasets, "_fetch", fake)
    with pytest.raises(InputError, match="outside"):
        load_dataset("ogbn-arxiv", tmp_path / "root")
    assert not (tmp_path / "evil.txt").exists()


def test_google_drive_datasets_are_never_fetched(tmp_path):
    with pytest.raises(InputError) as e:
        load_dataset("flickr", tmp_path)  # the autouse fixture fails the test on any fetch
    msg = str(e.value)
    assert "drive.google.com" in msg and "adj_full.npz" in msg and "role.json" in msg


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(InputError) as e:
        load_dataset("karate", download=False)
    for name in ("cora", "ogbn-products", "tolokers", "flickr"):
        assert name in str(e.value)
    assert get_spec("Amazon_Computers").name == "amazon-computers"


def test_registry_covers_the_required_datasets():
    required = {"cora", "citeseer", "pubmed", "amazon-computers", "amazon-photo", "coauthor-cs", "coauthor-physics",
                "squirrel", "chameleon", "tolokers", "flickr", "reddit", "yelp", "ogbn-arxiv", "ogbn-products"}
    assert required <= set(known_datasets())
    for name in known_datasets():
        spec = get_spec(name)
        assert spec.files and (spec.urls or spec.archive or spec.manual), name


def test_dataset_status(shared_data):
    status = {s.name: s for s in dataset_status(shared_data)}
    assert status["cora"].present and status["tolokers"].present
    assert not status["pubmed"].present and not status["flickr"].present
    assert shared_data / "amazon_computers" / "amazon_cs.npz" in status["amazon-computers"].paths
    name, paths, present = status["squirrel"]  # plain tuples for the CLI
    assert name == "squirrel" and present


def test_resolve_root_order(tmp_path, monkeypatch):
    monkeypatch.delenv("FULLGRAPH_DATA", raising=False)
    work = tmp_path / "repo"
    work.mkdir()
    monkeypatch.chdir(work)
    assert resolve_root(None) == work / "data"  # nothing exists: ./data, where downloads go
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert resolve_root(None) == (tmp_path / "shared" / "data").resolve()
    (work / "data").mkdir()
    assert resolve_root(None) == (work / "data").resolve()
    monkeypatch.setenv("FULLGRAPH_DATA", str(tmp_path / "env"))
    assert resolve_root(None) == tmp_path / "env"
    assert resolve_root(tmp_path / "arg") == tmp_path / "arg"
