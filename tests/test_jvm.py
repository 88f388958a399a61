"""The JVM functions: compiled from the shipped Java source with the JDK, or left out (pandas)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from framework import jvm


def test_the_jar_is_compiled_from_the_source_once_and_reused(tmp_path: Path):
    javac = shutil.which("javac")
    assert javac is not None, "these machines have a JDK; without one Tributary folds in pandas"
    built = jvm.find_or_build((tmp_path / "a",), javac)
    assert built is not None and built.parent == tmp_path / "a"
    assert "tributary/SwaFold.class" in zipfile.ZipFile(built).namelist()
    assert jvm.find_or_build((tmp_path / "b", tmp_path / "a"), None) == built  # found, not rebuilt
    assert list((tmp_path / "a").iterdir()) == [built]  # no half-written files left beside it


def test_without_javac_or_when_turned_off_there_are_no_jvm_functions(spark, tmp_path: Path, monkeypatch):
    from pyspark.sql import functions as F

    assert jvm.find_or_build((tmp_path,), None) is None
    assert jvm.swa_fold(spark, 3, 10, F.lit(0)) is not None
    monkeypatch.setenv("TRIBUTARY_JVM", "0")
    assert jvm.swa_fold(spark, 3, 10, F.lit(0)) is None
