"""Every bench command that takes ``--peers`` checks its peers before it builds anything (issue 39:
``bench link --peers dgl`` without DGL spent 233 s and 5.5 GB on the graph before saying so)."""

import argparse

import pytest

from gglspeedup.bench import _common, attention_pooling, main, peers, temporal
from gglspeedup.bench._options import add_common_arguments, check_peers

NEVER_READ = "file:/never/read.npz"  # loading it would raise another error: nothing is loaded first

# command, the arguments that would build its graph or batches, the peers to name
COMMANDS = [
    ("sample", ["--graph", NEVER_READ], "dgl"),
    ("link", ["--graph", NEVER_READ], "dgl"),
    ("hetero", ["--dataset", NEVER_READ], "dgl"),
    ("temporal", ["--graph", NEVER_READ], "pyg"),
    ("inference", ["--graph", NEVER_READ], "dgl"),
    ("attention-pooling", ["--batches", "my-test"], "attpool2"),
]


@pytest.fixture
def peers_absent(monkeypatch):
    """Every peer missing, whatever this machine has installed; building a graph or a batch fails."""
    monkeypatch.setattr(peers, "why_unavailable", lambda name: f"{name} is not installed (test)")
    monkeypatch.setattr(temporal, "_why_unavailable", lambda name: f"{name} is not installed (test)")
    monkeypatch.setattr(attention_pooling, "_import_attpool2", lambda pool: (None, "attpool2 is not installed (test)"))

    def never(*args, **kwargs):
        raise AssertionError("a graph or a batch was built before the peers were checked")

    monkeypatch.setattr(_common, "load_graph", never)
    monkeypatch.setattr(attention_pooling, "attpool2_batch", never)


@pytest.mark.parametrize(("command", "inputs", "peer"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_command_whose_named_peers_are_all_missing_stops_before_building_anything(
    command, inputs, peer, peers_absent, capsys
):
    with pytest.raises(ValueError, match=rf"--peers {peer}: no named peer can run here") as info:
        main([command, *inputs, "--peers", peer])
    assert isinstance(info.value, peers.PeerUnavailable)
    assert "scripts/install_peers.sh" in str(info.value) and "--peers ''" in str(info.value)
    assert f"peer {peer}: unavailable ({peer} is not installed (test))" in capsys.readouterr().out


def test_missing_peers_beside_available_ones_are_reported_first_and_the_run_goes_on(capsys):
    args = argparse.ArgumentParser()
    add_common_arguments(args, "peers")
    named = args.parse_args(["--peers", "numpy,dgl"])
    assert named.peers_given and not args.parse_args([]).peers_given
    reasons = {"numpy": None, "dgl": "dgl does not import"}
    assert check_peers(named, ["numpy", "dgl"], reasons.get) == {"dgl": "dgl does not import"}
    assert "peer dgl: unavailable (dgl does not import); checked before any graph is built" in capsys.readouterr().out
    # The default peers (none named) all missing: reported, and the run measures gglspeedup alone.
    assert check_peers(args.parse_args([]), ["dgl"], reasons.get) == {"dgl": "dgl does not import"}
    assert check_peers(named, [], reasons.get) == {}


def test_peer_probes_import_only_and_say_why():
    assert peers.why_unavailable("numpy") is None
    for name in ("dgl", "pyg"):
        reason = peers.why_unavailable(name)
        assert reason is None or (isinstance(reason, str) and reason)
