"""`sapiens2-bench reproduce TABLE --help` describes that table: what runs, which checkpoints and whether
they are public (no albedo and no 1B-4K task checkpoint is), the data of the reported numbers."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main
from benchmarks.reproduce.sources import IN_HOUSE_DATA
from benchmarks.reproduce.table_rows import TABLES


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(["reproduce", *argv])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("table", TABLES)
def test_each_table_has_its_own_help(capsys, table):
    text = _help(capsys, table, "--help")
    assert f"Table {table[len('table'):]}," in text and "--checkpoint-root" in text
    if table in IN_HOUSE_DATA:
        assert " ".join(IN_HOUSE_DATA[table].split()) in text
    assert ("no public task checkpoint" in text) == (table in ("table4", "table6"))
    assert ("no albedo checkpoint is public" in text) == (table == "table7")


def test_help_without_a_table_is_the_command_overview(capsys):
    text = _help(capsys, "--help")
    assert "Table 4," not in text and "in-house and not public" in text
