"""JsonFormat.read_lines_array (read_archive's JSON values, found with numpy): the very lines read_lines gives,
for what the sink writes and for the files it never writes (blank or whitespace-led lines, no last newline)."""
from __future__ import annotations

import gzip
import io

import pytest

from lakesink.objects.formats.json import JsonFormat

CASES = {
    "sink output": b'{"a":1}\n"x"\n[1,2]\n' + b'{"n":"%d"}\n' * 3 % (1, 2, 3),
    "no last newline": b'{"a":1}\n{"a":2}',
    "blank lines": b'{"a":1}\n\n{"a":2}\n\n',
    "whitespace-led": b'{"a":1}\n  {"a":2}\n\t\n',
    "crlf": b'{"a":1}\r\n{"a":2}\r\n',
    "empty": b"",
    "only a newline": b"\n",
    "non-ascii": '{"é":"✓"}\n'.encode(),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_lines_array_is_read_lines(name, compression):
    data = CASES[name]
    fmt = JsonFormat(compression=compression)
    if compression == "gzip":
        data = gzip.compress(data)
    want = list(fmt.read_lines(io.BytesIO(data)))
    got = fmt.read_lines_array(io.BytesIO(data))
    assert got.to_pylist() == want
    assert got.type == "binary"
