"""demos/service_sage.py: GraphSAGE through partition servers learns exactly what it learns locally.

A tiny papers-like graph cut into 4 parts, served by 2 Ray actors of the session's Ray (in its
private network namespace, ``service_netns``): the loss curve through the service equals the local
run's, batch for batch.
"""

from service_netns import ray_session  # noqa: F401

from conftest import load_file


def test_service_ray_demo_loss_curve_equals_the_local_runs(ray_session, tmp_path, capsys):  # noqa: F811
    demo = load_file("demos/service_sage.py", "demo_service_sage")
    argv = ["--nodes", "3000", "--parts", "4", "--servers", "2", "--batches", "5", "--batch-size", "64"]
    result = demo.main([*argv, "--hidden", "16", "--feature-dim", "16", "--folder", str(tmp_path)])
    assert len(result["local_losses"]) == 5 and result["equal"]
    assert result["service_losses"] == result["local_losses"]
    assert result["transport"]["failures"] == 0
    assert "loss curves equal" in capsys.readouterr().out
