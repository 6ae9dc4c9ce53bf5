"""ordo.export's folder swap: a new export replaces an earlier one only when complete, and never loses it."""

from pathlib import Path

import pytest

from ordo.export import write_directory


def _write_model(text: str):
    def write(folder: Path) -> None:
        (folder / "model.bin").write_text(text)
    return write


def test_a_failed_write_or_swap_keeps_the_earlier_export(tmp_path, monkeypatch):
    out = tmp_path / "ct2"
    write_directory(out, _write_model("first"))
    assert (out / "model.bin").read_text() == "first"

    def broken(folder: Path) -> None:
        raise RuntimeError("converter failed")

    with pytest.raises(RuntimeError):
        write_directory(out, broken)
    assert (out / "model.bin").read_text() == "first"
    original_rename = Path.rename

    def rename(self: Path, target: Path) -> Path:
        if Path(target) == out and self.name.endswith(".tmp"):
            raise OSError("rename refused")
        return original_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError):
        write_directory(out, _write_model("second"))
    monkeypatch.undo()
    assert (out / "model.bin").read_text() == "first"
    write_directory(out, _write_model("second"))
    assert (out / "model.bin").read_text() == "second" and sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]
