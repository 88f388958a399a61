"""One pass over a DataFrame whose tasks write several Parquet folders (framework.io.task_parquet)."""

from __future__ import annotations

import pyarrow.parquet as pq

from framework.io.task_parquet import Folder, write_counted, write_folders


def test_each_folder_gets_the_rows_its_pick_chooses_from_one_pass(spark, tmp_path):
    """Three tasks; evens and odds picked from the same batches (a column dropped on one side),
    a folder no row goes to still made; a second job's files sit beside the first's."""
    frame = spark.range(0, 1000, numPartitions=3).selectExpr("id", "id % 2 = 0 AS even")

    def evens(table):  # pyarrow Tables
        return table.filter(table.column("even")).drop_columns(["even"])

    def odds(table):
        import pyarrow.compute as pc

        return table.filter(pc.invert(table.column("even")))

    def nothing(table):
        return table.slice(0, 0)

    folders = {name: Folder(str(tmp_path / name), pick) for name, pick in (("evens", evens), ("odds", odds), ("none", nothing))}
    assert write_folders(frame, folders) == {"evens": 500, "odds": 500, "none": 0}
    assert sorted(pq.read_table(tmp_path / "evens").column("id").to_pylist()) == list(range(0, 1000, 2))
    assert pq.read_table(tmp_path / "evens").column_names == ["id"]
    assert sorted(pq.read_table(tmp_path / "odds").column("id").to_pylist()) == list(range(1, 1000, 2))
    assert len(list((tmp_path / "evens").iterdir())) == 3  # one file per task
    assert list((tmp_path / "none").iterdir()) == []

    write_folders(frame, {"evens": folders["evens"]})
    assert len(list((tmp_path / "evens").iterdir())) == 6
    assert pq.read_table(tmp_path / "evens").num_rows == 1000


def test_a_folders_figures_are_counted_in_the_tasks_and_summed_over_the_job(spark, tmp_path):
    """Three tasks count what they see before picking (every row, and the sum of the even ids);
    the job returns each folder's sums, and nothing for a folder that counts nothing."""
    frame = spark.range(0, 1000, numPartitions=3).selectExpr("id", "id % 2 = 0 AS even")

    def evens(table):
        return table.filter(table.column("even"))

    def tally(table):
        import pyarrow.compute as pc

        return {"seen": table.num_rows, "even_sum": pc.sum(evens(table).column("id")).as_py() or 0}

    folders = {"evens": Folder(str(tmp_path / "evens"), evens, tally), "all": Folder(str(tmp_path / "all"), lambda t: t)}
    written, figures = write_counted(frame, folders)
    assert written == {"evens": 500, "all": 1000}
    assert figures == {"evens": {"seen": 1000, "even_sum": sum(range(0, 1000, 2))}, "all": {}}
