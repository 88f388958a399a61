"""The engine's class archive: the first engine lists its classes; the archive is built from that
list with the JVM's own java, class path and module options, and a JVM started like it maps it."""

from __future__ import annotations

import os
import subprocess
import time

from framework.warm import class_archive


def test_an_engine_without_an_archive_lists_its_classes_and_clears_lists_of_killed_engines(tmp_path):
    archive = tmp_path / "spark-classes-test.jsa"
    stale = archive.with_name(f"{archive.name}.1{class_archive._LIST}")
    stale.write_text("java/lang/Object\n")
    old = time.time() - 2 * class_archive._LIST_LIFE_S
    os.utime(stale, (old, old))

    options, class_list = class_archive.java_options(archive)

    assert class_list == class_archive.listed(archive)
    assert options == f"-XX:DumpLoadedClassList={class_list}"
    assert not stale.exists()
    assert not class_archive.being_written(archive)
    class_list.write_text("java/lang/Object\n")  # as the JVM does while it runs
    assert class_archive.being_written(archive)

    archive.write_bytes(b"x")
    assert class_archive.java_options(archive) == (f"-XX:SharedArchiveFile={archive} {class_archive._QUIET}", None)
    assert class_archive.java_options(None) == ("", None)


def test_the_archive_built_from_a_list_is_one_a_jvm_like_the_sessions_maps(spark, tmp_path):
    archive = tmp_path / "spark-classes-test.jsa"
    class_list = class_archive.listed(archive)
    class_list.write_text("java/lang/Object\norg/apache/spark/SparkConf\n")
    command = class_archive.dump_command(spark._jvm, class_list, archive)
    class_path = command[command.index("-cp") + 1]
    assert class_path == spark._jvm.java.lang.System.getProperty("java.class.path")
    assert any(option.startswith("--add-opens=") for option in command)  # the session's module options

    class_archive._write(command)

    assert archive.is_file() and not class_list.exists()
    assert [p.name for p in tmp_path.iterdir()] == [archive.name]  # no half-written file left
    mapped = subprocess.run(
        [command[0], "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", class_path, "-version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert mapped.returncode == 0, mapped.stderr
    assert "sharing" in mapped.stderr


def test_a_jvm_a_command_starts_maps_the_archive_and_lists_no_classes(tmp_path, monkeypatch):
    """`tributary test --no-engine` starts a JVM of its own: it maps the archive when there is one,
    and without one starts as before (listing classes is an engine's job: its list becomes the archive)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TRIBUTARY_CLASS_ARCHIVE", "1")
    archive = class_archive.archive_path()
    assert archive is not None and archive.parent == tmp_path / "tributary"

    assert class_archive.using_options() == ""
    assert not archive.parent.exists()  # nothing listed, nothing made

    archive.parent.mkdir()
    archive.write_bytes(b"x")
    assert class_archive.using_options() == f"-XX:SharedArchiveFile={archive} {class_archive._QUIET}"
    monkeypatch.setenv("TRIBUTARY_CLASS_ARCHIVE", "0")
    assert class_archive.using_options() == ""


def test_a_run_without_an_engine_starts_its_jvm_with_the_archive(cli, project, tmp_path, monkeypatch):
    """`tributary run --no-engine` (or a profile without the warm engine) starts the driver's JVM in
    the CLI's process: with the archive an engine left, as `tributary test` does."""
    archive, asked = spied_archive(tmp_path, monkeypatch)
    code, out, err = cli("run", "service_calls", "--no-engine")
    assert code == 0, out + err
    assert asked == [f"-XX:SharedArchiveFile={archive} {class_archive._QUIET}"]


def spied_archive(tmp_path, monkeypatch) -> tuple:
    """An archive (a stand-in file) where this Java and Spark's would be, and the java options each
    spark_session call is then given (the list); the suite's session still serves the calls."""
    import framework.engine.session as session

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TRIBUTARY_CLASS_ARCHIVE", "1")
    archive = class_archive.archive_path()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    started = session.spark_session
    asked: list[str] = []

    def spark_session(profile, log_file=None, java_options=""):
        asked.append(java_options)
        return started(profile, log_file, java_options)

    monkeypatch.setattr(session, "spark_session", spark_session)
    return archive, asked
