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


def test_a_jar_others_could_have_put_there_is_not_loaded(tmp_path: Path):
    """The jar runs inside Spark's JVM: one planted in a folder another user may write (the shared
    /tmp/tributary-jvm of before) is neither loaded nor built beside."""
    javac = shutil.which("javac")
    built = jvm.find_or_build((tmp_path / "a",), javac)
    assert built is not None
    planted = tmp_path / "shared"
    planted.mkdir()
    shutil.copy(built, planted / built.name)
    planted.chmod(0o777)
    assert jvm.find_or_build((planted,), None) is None
    assert jvm.find_or_build((planted, tmp_path / "a"), None) == built
    assert jvm.find_or_build((planted, tmp_path / "c"), javac) == tmp_path / "c" / built.name


def test_without_javac_or_when_turned_off_there_are_no_jvm_functions(spark, tmp_path: Path, monkeypatch):
    from pyspark.sql import functions as F

    assert jvm.find_or_build((tmp_path,), None) is None
    assert jvm.swa_fold(spark, 3, 10, F.lit(0)) is not None
    monkeypatch.setenv("TRIBUTARY_JVM", "0")
    assert jvm.swa_fold(spark, 3, 10, F.lit(0)) is None
