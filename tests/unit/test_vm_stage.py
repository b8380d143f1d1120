"""vm/stage.py's pure parts and its refusals: the image is rebuilt exactly
when what it is built from changes, the VM has no network, and a machine
without the tools, root or disk gets a message before anything is built."""
import importlib.util
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("vm_stage", os.path.join(HERE, "..", "..", "vm", "stage.py"))
stage = importlib.util.module_from_spec(SPEC)
sys.modules["vm_stage"] = stage   # dataclasses look their module up
SPEC.loader.exec_module(stage)


def test_the_image_key_follows_its_inputs_and_its_flavour(tmp_path, monkeypatch):
    for rel in stage.IMAGE_INPUTS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    monkeypatch.setattr(stage, "PROJECT", str(tmp_path))
    twelve = stage.image_key(stage.FLAVOURS["12"])
    assert stage.image_key(stage.FLAVOURS["12"]) == twelve
    assert stage.image_key(stage.FLAVOURS["13"]) != twelve
    (tmp_path / "vm" / "provision.sh").write_text("changed")
    changed = stage.image_key(stage.FLAVOURS["12"])
    assert changed != twelve
    monkeypatch.setattr(stage, "BASE_PACKAGES", stage.BASE_PACKAGES + ",vim")   # the recipe counts too
    assert stage.image_key(stage.FLAVOURS["12"]) != changed


def test_the_vm_has_no_network_and_shares_the_checkout_read_only():
    argv = stage.qemu_argv("/img", "/o.qcow2", "/share", "/out", "tcg", "/c.log")
    assert argv[argv.index("-nic") + 1] == "none"
    assert not any(a.startswith(("-netdev", "user,", "hostfwd")) for a in argv)
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert any("path=/share" in s and "readonly=on" in s for s in shares), shares
    assert argv[argv.index("-cpu") + 1] == stage.TCG_CPU != "qemu64"   # NumPy needs SSE4.2


def test_missing_tools_are_named_with_the_packages_to_install(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "debootstrap" else "/usr/bin/" + tool)
    with pytest.raises(stage.StageError, match="missing packages: debootstrap"):
        stage.check_host(1)


def test_too_little_disk_is_refused_before_building(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: "/usr/bin/" + tool)
    monkeypatch.setattr(stage, "CACHE", str(tmp_path))
    with pytest.raises(stage.StageError, match=r"GiB free; the VM stage needs 100000 GiB"):
        stage.check_host(100000)
    assert os.listdir(tmp_path) == []


def test_without_root_it_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(stage.StageError, match="must run as root"):
        stage.check_host(1)


def test_a_failed_build_leaves_nothing_behind(monkeypatch, tmp_path):
    monkeypatch.setattr(stage, "CACHE", str(tmp_path))

    def fail(flavour, work):
        os.makedirs(os.path.join(work, "root", "etc"))
        raise stage.StageError("debootstrap failed")
    monkeypatch.setattr(stage, "_build", fail)
    with pytest.raises(stage.StageError):
        stage.build_image(stage.FLAVOURS["12"], "k")
    assert os.listdir(tmp_path) == []


def test_the_outcome_names_what_went_wrong(tmp_path, capsys):
    assert stage._outcome("no boot", str(tmp_path), 301, 2700) == 1
    assert "did not reach the stage" in capsys.readouterr().err
    assert stage._outcome(0, str(tmp_path), 30, 2700) == 1
    assert "without running the stage" in capsys.readouterr().err
    (tmp_path / "rc").write_text("3\n")
    (tmp_path / "stage.log").write_text("".join(f"line {i}\n" for i in range(500)) + "FAILED test_x - boom\n")
    assert stage._outcome(0, str(tmp_path), 30, 2700) == 3
    err = capsys.readouterr().err   # a failed stage's end is shown: CI keeps no results folder
    assert "FAILED test_x - boom" in err and "line 499" in err and "line 100\n" not in err
    (tmp_path / "rc").write_text("0\n")
    assert stage._outcome(0, str(tmp_path), 30, 2700) == 0
    assert "FAILED" not in capsys.readouterr().err


def test_the_cluster_vms_reach_only_each_other_through_the_hosts_loopback():
    net = ("-netdev", "socket,id=cluster,listen=127.0.0.1:5555", "-device", "virtio-net-pci,netdev=cluster")
    argv = stage.qemu_argv("/img", "/o.qcow2", "/share", "/out", "tcg", "/c.log", 1, stage.TCG_CPU, net)
    assert argv[argv.index("-nic") + 1] == "none"   # no user network: nothing outside the segment
    backends = [argv[i + 1] for i, a in enumerate(argv) if a == "-netdev"]
    assert backends == ["socket,id=cluster,listen=127.0.0.1:5555"]
    assert stage.CLUSTER_NET.startswith("198.19.")   # the benchmarking range, apart from the fabric's hosts
