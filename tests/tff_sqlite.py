"""Writes databases in the SQLite format of TFF's `SqlClientData`.

The writer lives in `tasks.common.fixtures` (the binaries' offline fixtures use it
too); the CelebA and Stack Overflow test fixtures call it by this name.
"""

from tasks.common.fixtures import write_sql_client_data as write  # pylint: disable=unused-import
