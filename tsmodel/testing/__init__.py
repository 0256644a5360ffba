"""Helpers for testing applications that use tsmodel.

The pytest plugin (`tsmodel.testing.plugin`, loaded automatically once
the package is installed) gives fixtures that run a test on the embedded store
and on the Cloud Bigtable emulator; the functions here compare a table's raw
rows with the expected ones and work with any test runner:

    from tsmodel.testing import assert_rows

    def test_saves_one_row(tsmodel_connection):
        tsmodel_connection.create_tables(ServerMetric)
        tsmodel_connection.save(ServerMetric(hostname="h1", time=T0, cpu1_usr=0.5))
        assert_rows(tsmodel_connection, "METRIC", {
            "h1#1426535612045": {"METRIC:CPU/CPU1_USR": struct.pack(">d", 0.5)},
        })

See docs/testing.md.
"""

from tsmodel.testing._rows import ExpectedCell, ExpectedRows, Versions, assert_rows, table_rows

__all__ = ["assert_rows", "table_rows", "ExpectedCell", "ExpectedRows", "Versions",
           "BACKEND_KINDS"]

#: The backends the plugin's fixtures run a test on, in this order.
BACKEND_KINDS = ("embedded", "emulator")
