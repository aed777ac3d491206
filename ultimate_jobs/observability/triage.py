"""Dead-letter triage (P10): the fingerprint of a failed attempt.

A fingerprint names a failure's CAUSE, so 5,000 dead jobs from two causes are two
groups. It is computed from the error text the attempt stored (``last_error`` of the
job, ``error`` of an attempt: ``<module.Class>: <message>`` then the traceback):

* the exception class: the first line up to the first ``": "`` (the whole line for a
  library code such as ``LEASE_LAPSED_FINAL_ATTEMPT``);
* the message (the rest of the first line), normalised: lower-cased; UUIDs, ``0x``
  hex numbers, quoted strings and runs of digits replaced by ``<uuid>``, ``<hex>``,
  ``<str>``, ``<n>`` (in that order); runs of white space made one space; at most 200
  characters;
* the innermost three frames of the traceback as ``file.py:function`` (no directory,
  no line number, so a deploy that moves lines keeps the fingerprint).

The fingerprint is the first 16 hex digits of the MD5 of the three, joined by
newlines. The database computes the same with the function ``ultimate_jobs_fingerprint``
(migration 0008) into the job row's ``fingerprint`` column (a trigger when the row's
error is written; the archive move copies it), which the readers and the bulk verbs
filter on through an index; ``tests/integration/test_triage.py`` checks both agree.
"""

from __future__ import annotations

import hashlib
import re

from ultimate_jobs.ground.exceptions import InvalidArgument

FRAMES = 3
MESSAGE_CHARS = 200
_NORMALISE = (
    (
        re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
        "<uuid>",
    ),
    (re.compile(r"0x[0-9a-f]+"), "<hex>"),
    (re.compile(r"'[^']*'"), "<str>"),
    (re.compile(r'"[^"]*"'), "<str>"),
    (re.compile(r"[0-9]+"), "<n>"),
    (re.compile(r"\s+"), " "),
)
_FRAME = re.compile(r'File "([^"]*)", line [0-9]+, in ([^\n]*)')


def fingerprint(error: str | None) -> str | None:
    """The fingerprint of a stored error text; None for no error."""
    if not error:
        return None
    head = error.split("\n", 1)[0]
    kind, colon, message = head.partition(": ")
    if not colon:
        kind, message = head, ""
    message = message.lower()
    for pattern, replacement in _NORMALISE:
        message = pattern.sub(replacement, message)
    message = message.strip()[:MESSAGE_CHARS]
    frames = [
        f"{path.rsplit('/', 1)[-1]}:{function.strip()}"
        for path, function in _FRAME.findall(error)
    ][-FRAMES:]
    text = "\n".join((kind, message, ";".join(frames)))
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def check_fingerprint(value: object) -> str:
    """A fingerprint as ``jobs show`` prints it: 16 lower-case hex digits."""
    if (
        not isinstance(value, str)
        or len(value) != 16
        or any(c not in "0123456789abcdef" for c in value)
    ):
        raise InvalidArgument(
            "fingerprint", value, "16 lower-case hex digits, as jobs show prints it"
        )
    return value


# The same function in SQL (migration 0008 creates it; kept here so the test that
# compares both reads one text).
FUNCTION_SQL = r"""
CREATE OR REPLACE FUNCTION ultimate_jobs_fingerprint(error text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
SELECT CASE WHEN error IS NULL OR error = '' THEN NULL ELSE left(md5(
    parts.kind || E'\n' ||
    left(btrim(
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(lower(parts.message),
            '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
            '0x[0-9a-f]+', '<hex>', 'g'),
            '''[^'']*''', '<str>', 'g'),
            '"[^"]*"', '<str>', 'g'),
            '[0-9]+', '<n>', 'g'),
            '\s+', ' ', 'g'),
        ' '), 200) || E'\n' ||
    coalesce((
        SELECT string_agg(frame.name, ';' ORDER BY frame.n)
          FROM (
              SELECT regexp_replace(found.m[1], '^.*/', '') || ':' || btrim(found.m[2])
                         AS name,
                     found.n,
                     count(*) OVER () AS total
                FROM regexp_matches(
                         error, 'File "([^"]*)", line [0-9]+, in ([^\n]*)', 'g'
                     ) WITH ORDINALITY AS found(m, n)
          ) AS frame
         WHERE frame.n > frame.total - 3
    ), '')
), 16) END
  FROM (
      SELECT CASE WHEN position(': ' IN head.line) > 0
                  THEN left(head.line, position(': ' IN head.line) - 1)
                  ELSE head.line END AS kind,
             CASE WHEN position(': ' IN head.line) > 0
                  THEN substr(head.line, position(': ' IN head.line) + 2)
                  ELSE '' END AS message
        FROM (SELECT split_part(error, E'\n', 1) AS line) AS head
  ) AS parts
$fn$;
"""
