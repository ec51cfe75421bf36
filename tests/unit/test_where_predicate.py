"""`--where` / `read_archive(where=…)`: one boolean expression over the manifest's columns (issue #26 item 1).

:func:`lakesink.manifest.queries.where_predicate` is the check; the integration side (the predicate applied to a
frame already scoped to the config's job, a two-job manifest) is in tests/integration/test_sql_jobs.py.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesink.errors import EXIT_USAGE, ArchiveQueryError
from lakesink.manifest.queries import PREDICATE_HINT, where_predicate

UNION = ("1=0 UNION ALL SELECT * FROM delta.`s3a://bkt/_lakesink/manifest` "
         "WHERE job = 'B' AND kind = 'object'")


def refusal(where: str) -> str:
    with pytest.raises(ArchiveQueryError) as e:
        where_predicate(where)
    msg = str(e.value)
    assert e.value.exit_code == EXIT_USAGE == 2
    assert "\n" not in msg and msg.startswith(f"--where {where!r}: "), msg
    return msg


@pytest.mark.parametrize("where, text", [
    ("topic = 'orders'", "topic = 'orders'"),
    ("kafka_partition = 1 AND first_offset >= 3", "kafka_partition = 1 AND first_offset >= 3"),
    ("object_key LIKE '%0000000999%'", "object_key LIKE '%0000000999%'"),
    ("kafka_partition IN (0, 1) OR topic RLIKE '^o'", "kafka_partition IN (0, 1) OR topic RLIKE '^o'"),
    ("exists(side_files, s -> s.size_bytes > 0)", "EXISTS(side_files, s -> s.size_bytes > 0)"),  # the array function
    ("max_timestamp >= TIMESTAMP '2026-11-01'", "max_timestamp >= CAST('2026-11-01' AS TIMESTAMP)"),
    ("`topic` = 'it\\'s'", "`topic` = 'it\\'s'"),
    ("no_such_column = 1", "no_such_column = 1"),  # unknown columns are Spark's to name (it resolves them)
])
def test_an_expression_is_accepted_as_spark_sql(where, text):
    assert where_predicate(where) == text


def test_union_reaching_another_jobs_manifest_is_refused():
    msg = refusal(UNION)
    assert msg.endswith(f": a set operation (UNION) is not allowed ({PREDICATE_HINT})"), msg
    assert "a set operation (INTERSECT)" in refusal("topic = 'a' INTERSECT SELECT 1")
    assert "a set operation (EXCEPT)" in refusal("topic = 'a' EXCEPT SELECT 1")


@pytest.mark.parametrize("where", [
    "topic = (SELECT max(topic) FROM delta.`s3a://bkt/_lakesink/manifest` WHERE job = 'B')",  # scalar subquery
    "(SELECT count(*) FROM manifest WHERE job = 'B') > 0",
    "topic IN (SELECT topic FROM manifest)",
    "EXISTS (SELECT 1 FROM manifest WHERE job = 'B')",
    "topic = 'x' OR (WITH b AS (SELECT 1 AS n) SELECT n FROM b) = 1",
    "SELECT * FROM manifest",
    "VALUES (1)",
])
def test_a_subquery_is_refused(where):
    assert refusal(where).endswith(f": a subquery is not allowed ({PREDICATE_HINT})")


@pytest.mark.parametrize("where", ["topic = 'x'; DROP TABLE manifest", "topic = 'x';",
                                   "topic = 'x'; SELECT * FROM manifest"])
def test_a_second_statement_is_refused(where):
    assert refusal(where).endswith(f": a second statement (';') is not allowed ({PREDICATE_HINT})")


def test_a_table_reference_is_refused():
    assert refusal("TABLE manifest").endswith(f": a table reference is not allowed ({PREDICATE_HINT})")


def test_a_semicolon_or_keyword_inside_a_string_is_just_text():
    assert where_predicate("object_key = 'a;b UNION SELECT'") == "object_key = 'a;b UNION SELECT'"


@pytest.mark.parametrize("where, text", [
    ("topic = 'x' -- ) OR (1=1", "topic = 'x'"),          # a line comment ends the predicate, and is dropped
    ("topic = 'x' -- \nOR job = 'B'", "topic = 'x' OR job = 'B'"),  # the next line is predicate again (job-scoped)
    ("topic = 'x' /* OR job = 'B' */", "topic = 'x'"),
    ("topic = 'x' /* */ OR job = 'B'", "topic = 'x' OR job = 'B'"),
    ("record_count > 0 /* /* */ OR 1 = 1 */", "record_count > 0"),  # nested, as Spark nests them
])
def test_comments_are_dropped_so_spark_parses_exactly_what_was_checked(where, text):
    out = where_predicate(where)
    assert out == text and "--" not in out and "/*" not in out


@pytest.mark.parametrize("where, near", [
    ("topic = = 'x'", "'='"),
    ("topic = 'x' AND", "'AND'"),          # F.expr would have taken the AND as an alias
    ("topic = 'x') OR (1=1", "')'"),        # closing a wrapper's parenthesis
    ("topic = 'x' AS ok", "'AS'"),
])
def test_text_that_is_not_one_expression_is_a_parse_syntax_error(where, near):
    msg = refusal(where)
    assert f"[PARSE_SYNTAX_ERROR] Syntax error at or near {near}" in msg, msg


def test_an_unterminated_string_or_comment_is_a_parse_syntax_error():
    for where in ("topic = 'x", "topic = 'x' /* OR 1=1", "`topic = 'x'"):
        assert "[PARSE_SYNTAX_ERROR]" in refusal(where)


def test_the_label_names_the_caller():
    with pytest.raises(ArchiveQueryError) as e:
        where_predicate("1=1;", label="where")
    assert str(e.value).startswith("where '1=1;': a second statement")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([*"()';-*/ =`\n", "SELECT", "FROM", "UNION", "topic", "job", "'B'", "t", "1", "OR",
                                  "AND", "EXISTS", "IN", "VALUES", "TABLE", " "]), min_size=1, max_size=14)
       .map("".join))
def test_whatever_is_accepted_is_one_expression_without_a_query(where):
    """Property: an accepted predicate, rendered, parses back as one expression holding no query or table."""
    import sqlglot
    from sqlglot import exp

    try:
        text = where_predicate(where)
    except ArchiveQueryError:
        return
    from sqlglot.tokens import TokenType

    # no statement separator outside a string literal
    assert all(t.token_type != TokenType.SEMICOLON for t in sqlglot.tokenize(text, read="spark")), text
    tree = sqlglot.parse_one(text, read="spark", into=exp.Condition)
    assert not any(isinstance(n, (exp.Query, exp.Table, exp.Selectable, exp.From)) for n in tree.walk()), text
