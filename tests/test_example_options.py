"""The examples' command lines refuse a bad value as a usage error on its flag (exit status 2),
before any data is built: each of these reached the user as a traceback naming the library's
parameter (num_nodes, dim, memory, cache_size, device, method), torch's ("Invalid learning rate",
"dropout probability") or NumPy's ("expected non-negative integer", "data type 'xx' not
understood"), or was accepted (``--hidden 0``, ``--embedding 0``: a zero-width model)."""

import pytest

from gglspeedup.examples import sage_papers_like, service_sage, temporal_links


def _refused(build_parser, argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and message in err and "Traceback" not in err, (argv, err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--embedding", "0"], "argument --embedding: must be >= 1, got '0'"),
        (["--hidden", "0"], "argument --hidden: must be >= 1, got '0'"),
        (["--lr", "-1"], "argument --lr: must be a finite number > 0.0, got '-1'"),
        (["--dropout", "2"], "argument --dropout: dropout must be in [0, 1), got '2'"),
        (["--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
        (["--device", "xx"], "argument --device: device must look like 'cpu', 'cuda' or 'cuda:<index>'"),
    ],
)
def test_temporal_links_flags(argv, message, capsys):
    _refused(temporal_links.build_parser, argv, message, capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "argument --nodes: must be >= 1, got '0'"),
        (["--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
        (["--memory", "xx"], "argument --memory: the memory budget must be a number with an optional K/M/G/T unit"),
        (["--feature-dim", "0"], "argument --feature-dim: must be >= 1, got '0'"),
        (["--feature-dtype", "xx"], "argument --feature-dtype: must name a numeric NumPy dtype"),
        (["--feature-dtype", "str"], "argument --feature-dtype: must name a numeric NumPy dtype"),
        (["--cache-size", "xx"], "argument --cache-size: the cache size must be a number with an optional K/M/G/T"),
        (["--batches", "0"], "argument --batches: must be >= 1, got '0'"),
        (["--hidden", "0"], "argument --hidden: must be >= 1, got '0'"),
        (["--lr", "nan"], "argument --lr: must be a finite number > 0.0, got 'nan'"),
        (["--prefetch", "-1"], "argument --prefetch: must be >= 0, got '-1'"),
        (["--device", "gpu:x"], "argument --device: device must look like"),
        (["--log-every", "0"], "argument --log-every: must be >= 1, got '0'"),
    ],
)
def test_sage_papers_like_flags(argv, message, capsys):
    _refused(sage_papers_like.build_parser, argv, message, capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--method", "xx"], "argument --method: invalid choice: 'xx'"),
        (["--feature-dim", "0"], "argument --feature-dim: must be >= 1, got '0'"),
        (["--hidden", "0"], "argument --hidden: must be >= 1, got '0'"),
        (["--lr", "-1"], "argument --lr: must be a finite number > 0.0, got '-1'"),
        (["--cache-size", "xx"], "argument --cache-size: the cache size must be a number"),
        (["--servers", "0"], "argument --servers: must be >= 1, got '0'"),
        (["--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
        (["--address", "xx"], "argument --address: the address must be 'auto', 'host:port' or 'ray://host:port'"),
    ],
)
def test_service_sage_flags(argv, message, capsys):
    _refused(service_sage.build_parser, argv, message, capsys)


def test_service_sage_refuses_more_servers_than_parts_before_ray(capsys):
    with pytest.raises(SystemExit) as done:
        service_sage.run(["--parts", "2", "--servers", "3"])
    assert done.value.code == 2 and "--servers (3) must be at most --parts (2)" in capsys.readouterr().err


def test_good_values_parse_as_before():
    args = sage_papers_like.build_parser().parse_args(
        ["--memory", "512M", "--feature-dtype", "float32", "--lr", "0.01"]
    )
    assert (args.memory, args.feature_dtype, args.lr, args.device) == ("512M", "float32", 0.01, "cpu")
    args = temporal_links.build_parser().parse_args(["--dropout", "0", "--device", "cuda:1", "--seed", "3"])
    assert (args.dropout, args.device, args.seed) == (0.0, "cuda:1", 3)
