"""A text source's `parse.pattern` judged as Java reads it, without a JVM.

Why: Spark runs the pattern with java.util.regex, and `validate` has only Python's `re`, whose
dialect differs both ways: Python's `(?P<name>…)` passes `re` and fails the run, while Java's
`(?<name>…)`, `\\p{Digit}` or `\\Q…\\E` are refused by `re` though the run takes them. So the
pattern is read once by Java's rules: what Java refuses and Python takes is refused here, with the
Java spelling as the fix; what only Java has is translated to a Python equivalent of the same
groups, and `re` then checks the rest of the syntax and counts the groups.
"""

from __future__ import annotations

import re
import warnings

#: Java's inline flags: (?idmsuxU-idmsuxU) and (?flags:X)
_JAVA_FLAGS = frozenset("idmsuxU")
#: what `re` keeps of them (d and U have no Python flag and change no syntax)
_PYTHON_FLAGS = frozenset("imsux")
_JAVA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_REPETITION = re.compile(r"\{\d+(,\d*)?\}")
#: escapes Java and Python read alike (a letter after a backslash: anything else is refused by both)
_COMMON = frozenset("tnrfaedDsSwWbBAZ0123456789")
_DIGIT_PROPERTIES = frozenset({"Digit", "IsDigit", "Nd", "javaDigit"})


def java_groups(pattern: str) -> int:
    """The number of capturing groups of `pattern` read as a Java regular expression; ValueError
    (what is wrong, and the Java spelling where it differs from Python's) when Java refuses it."""
    translated = _translate(pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nested sets and `&&`: Java's syntax, a FutureWarning in `re`
            return re.compile(translated).groups
    except re.error as e:
        raise ValueError(f"pattern is not a regular expression: {e}") from None


def java_group_names(pattern: str) -> dict[str, int]:
    """The named groups of a Java regular expression `java_groups` takes, each with its number."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(re.compile(_translate(pattern)).groupindex)


def _translate(p: str) -> str:
    out: list[str] = []
    i, n, depth, verbose = 0, len(p), 0, False
    while i < n:
        c = p[i]
        if c == "\\":
            text, i = _escape(p, i, depth > 0)
            out.append(text)
            continue
        if depth:
            if c == "[":
                depth += 1  # Java's union [a[b]]: one class for `re`
                i += 2 if p.startswith("[^", i) else 1
                if i < n and p[i] == "]":  # a literal ] first in the class
                    out.append("\\]")
                    i += 1
                continue
            if c == "]":
                depth -= 1
                out.append("]" if depth == 0 else "")
            elif p.startswith("&&", i):
                i += 2  # Java's intersection [a-z&&[^aeiou]]
                continue
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            depth = 1
            start = 2 if p.startswith("[^", i) else 1
            out.append(p[i : i + start])
            i += start
            if i < n and p[i] == "]":  # a literal ] first in the class
                out.append("\\]")
                i += 1
            continue
        if c == "{" and not _REPETITION.match(p, i):
            raise ValueError(
                f"pattern has a '{{' at position {i} that is not a repetition such as {{2}} or {{1,3}}; Java refuses it "
                "(Python takes it as a plain brace): write \\{ for the character"
            )
        if c == "(" and p.startswith("(?", i):
            text, i, verbose = _group_opening(p, i, verbose)
            out.append(text)
            continue
        out.append(c)
        i += 1
    text = "".join(out)
    return f"(?x){text}" if verbose and not text.startswith("(?x)") else text


def _group_opening(p: str, i: int, verbose: bool) -> tuple[str, int, bool]:
    """`(?…` at i: Python's own forms refused, Java's translated; returns (text, next index, verbose)."""
    rest = p[i + 2 :]
    if rest.startswith("P<"):
        name = rest[2:].split(">", 1)[0]
        raise ValueError(
            f"pattern uses Python's named group (?P<{name}>…); Spark runs Java's regular expressions: write (?<{name}>…)"
        )
    if rest.startswith("P="):
        name = rest[2:].split(")", 1)[0]
        raise ValueError(f"pattern uses Python's back-reference (?P={name}); Java writes \\k<{name}>")
    if rest.startswith("#"):
        raise ValueError("pattern has a (?#…) comment, which Java does not read: remove it")
    if rest.startswith("("):
        raise ValueError("pattern has a conditional group (?(…)…|…), which Java does not have: use alternatives (a|b)")
    if rest.startswith("<") and not rest.startswith(("<=", "<!")):
        name = rest[1:].split(">", 1)[0]
        if not _JAVA_NAME.fullmatch(name):
            raise ValueError(f"pattern names a group '{name}': Java's group names are letters and digits, starting with a letter")
        return f"(?P<{name}>", i + 3 + len(name), verbose
    flags = re.match(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])", p[i:])
    if flags and (flags.group(1) or flags.group(2) is not None):
        on, off = flags.group(1), flags.group(2) or ""
        unknown = sorted(set(on + off) - _JAVA_FLAGS)
        if unknown:
            raise ValueError(
                f"pattern has the inline flag(s) {''.join(unknown)}, which Java does not know; Java's are i d m s u x U"
            )
        verbose = verbose or "x" in on
        end = i + len(flags.group(0))
        if flags.group(3) == ")":
            return "", end, verbose  # Java takes (?i) anywhere; `re` only at the start: for `re`, nothing
        keep_on = "".join(f for f in on if f in _PYTHON_FLAGS - {"u", "x"})
        keep_off = "".join(f for f in off if f in _PYTHON_FLAGS - {"u", "x"})
        scoped = keep_on + (f"-{keep_off}" if keep_off else "")
        return (f"(?{scoped}:" if scoped else "(?:"), end, verbose
    return "(?", i + 2, verbose


def _escape(p: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at i, as `re` reads the same thing; returns (text, next index)."""
    if i + 1 >= len(p):
        raise ValueError("pattern ends with a lone backslash: write \\\\ for the character")
    d = p[i + 1]
    if d == "Q":  # \Q…\E: everything between quoted
        end = p.find("\\E", i + 2)
        quoted = p[i + 2 :] if end < 0 else p[i + 2 : end]
        return re.escape(quoted), len(p) if end < 0 else end + 2
    if d in "pP":
        if p.startswith("{", i + 2):
            end = p.find("}", i + 3)
            if end < 0:
                raise ValueError(f"pattern has \\{d}{{ that is never closed: write \\{d}{{Name}}")
            name, after = p[i + 3 : end], end + 1
        elif i + 2 < len(p):
            name, after = p[i + 2], i + 3
        else:
            raise ValueError(f"pattern ends with \\{d}: write \\{d}{{Name}}")
        digit = name in _DIGIT_PROPERTIES
        return ("\\d" if digit else "\\w") if d == "p" else ("\\D" if digit else "\\W"), after
    if d == "k":
        named = re.match(r"<([^>]*)>", p[i + 2 :])
        if not named:
            raise ValueError("pattern has \\k without a group name: write \\k<name>")
        return (f"(?P={named.group(1)})" if not in_class else "k"), i + 2 + len(named.group(0))
    if d == "x" and p.startswith("{", i + 2):
        end = p.find("}", i + 3)
        try:
            code = int(p[i + 3 : end], 16) if end > 0 else -1
        except ValueError:
            code = -1
        if not 0 <= code <= 0x10FFFF:
            raise ValueError("pattern has \\x{…} that is not a hexadecimal code point: write e.g. \\x{1F600}")
        return f"\\U{code:08x}", end + 1
    if d == "0":  # Java's octal: \0n, \0nn, \0mnn
        digits = re.match(r"[0-7]{1,3}", p[i + 2 :])
        if not digits or int(digits.group(0), 8) > 0o377:
            raise ValueError("pattern has \\0 without an octal number after it (Java's octal escape is \\0nn)")
        return f"\\x{int(digits.group(0), 8):02x}", i + 2 + len(digits.group(0))
    if d == "N" and p.startswith("{", i + 2):  # \N{NAME}: a character by its Unicode name
        end = p.find("}", i + 3)
        if end < 0:
            raise ValueError("pattern has \\N{ that is never closed: write \\N{NAME}")
        return ".", end + 1
    if d == "c" and i + 2 < len(p):
        return "\\x01", i + 3
    translated = {"z": "\\Z", "h": "\\s", "H": "\\S", "v": "\\s", "V": "\\S", "X": ".", "G": "", "e": "\\x1b"}
    if d in translated:
        if d == "X" and in_class:
            raise ValueError("pattern has \\X inside a character class, which Java refuses")
        return translated[d] if not (in_class and d == "G") else "", i + 2
    if d == "R":
        if in_class:
            raise ValueError("pattern has \\R inside a character class, which Java refuses")
        return "(?:\\r\\n|[\\n\\x0b\\f\\r\\x85\\u2028\\u2029])", i + 2
    if d == "u":
        return p[i : i + 6], i + 6
    if d.isalpha() and d not in _COMMON:
        raise ValueError(f"pattern has \\{d}, an escape Java does not know: write the character itself, or \\\\{d}")
    return p[i : i + 2], i + 2


def repeats_a_repetition(pattern: str) -> bool:
    """Whether `pattern` repeats, without bound, a part that itself repeats without bound and
    can split the same text between its rounds in more than one way (`(a+)+`, `(\\d+\\.?)*`).
    On a long value that almost matches, java.util.regex tries every split: exponential time,
    and Java's regex has no time limit, so one such value stops a run for good.

    The test is the usual one (nested unbounded repetition, "star height" above one), with one
    refinement so that common safe patterns pass: the inner repetition is unambiguous when its
    round holds a character that must appear and that the inner repetition cannot match
    (`([a-z]+\\.)+`: each round ends at its dot). Possessive (`a++`) and atomic (`(?>…)`) parts
    never backtrack and are not counted. Overlapping alternatives (`(a|aa)+`) are not seen."""
    from re import _parser  # type: ignore[attr-defined]

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = _parser.parse(_translate(pattern))
    except (ValueError, re.error, RecursionError):
        return False  # java_groups says what is wrong with it
    return _repeats_ambiguously(list(tree))


def _repeats_ambiguously(items: list) -> bool:  # type: ignore[type-arg]
    from re import _constants as c  # type: ignore[attr-defined]

    for op, av in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] == c.MAXREPEAT and _ambiguous_round(list(av[2])):
            return True
        if any(_repeats_ambiguously(list(part)) for part in _parts(op, av)):
            return True
    return False


def _parts(op: object, av: object) -> list:  # type: ignore[type-arg]
    """The sequences an element holds: a repetition's body, a group's, each branch, a lookaround's
    (not an atomic group's nor a possessive repetition's: they never backtrack)."""
    from re import _constants as c  # type: ignore[attr-defined]

    if op in (c.MAX_REPEAT, c.MIN_REPEAT):
        return [av[2]]  # type: ignore[index]
    if op is c.SUBPATTERN:
        return [av[3]]  # type: ignore[index]
    if op is c.BRANCH:
        return list(av[1])  # type: ignore[index]
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [av[1]]  # type: ignore[index]
    return []


def _ambiguous_round(body: list) -> bool:  # type: ignore[type-arg]
    """Whether one round of an unbounded repetition holds an unbounded repetition that nothing
    the round must match sets apart."""
    from re import _constants as c  # type: ignore[attr-defined]

    round_ = _flattened(body)
    for i, (op, av) in enumerate(round_):
        if op not in (c.MAX_REPEAT, c.MIN_REPEAT) and _holds_unbounded(round_[i : i + 1]):
            return True  # a repetition inside a branch, a lookaround or another repetition
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] == c.MAXREPEAT:
            inner = list(av[2])
            required = [ch for j, item in enumerate(round_) if j != i for ch in _required_character(item)]
            if not any(not _may_match(inner, ch) for ch in required):
                return True
    return False


def _flattened(items: list) -> list:  # type: ignore[type-arg]
    """A sequence with its plain groups opened: `(a+)` and `a+` are one element either way."""
    from re import _constants as c  # type: ignore[attr-defined]

    out = []
    for op, av in items:
        if op is c.SUBPATTERN:
            out += _flattened(list(av[3]))
        else:
            out.append((op, av))
    return out


def _holds_unbounded(items: list) -> bool:  # type: ignore[type-arg]
    from re import _constants as c  # type: ignore[attr-defined]

    for op, av in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] == c.MAXREPEAT:
            return True
        if any(_holds_unbounded(list(part)) for part in _parts(op, av)):
            return True
    return False


def _required_character(item: tuple) -> list[int]:  # type: ignore[type-arg]
    """The character an element must match, when it is one character (`.`, `x`, `x+`)."""
    from re import _constants as c  # type: ignore[attr-defined]

    op, av = item
    if op is c.LITERAL:
        return [av]
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] >= 1 and len(av[2]) == 1:
        return _required_character(av[2][0])
    return []


_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S"}
_CATEGORIES |= {"CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _may_match(body: list, ch: int) -> bool:  # type: ignore[type-arg]
    """Whether a repetition's body may match the character `ch` (yes when unsure)."""
    from re import _constants as c  # type: ignore[attr-defined]

    if len(body) != 1:
        return True
    op, av = body[0]
    if op is c.LITERAL:
        return bool(av == ch)
    if op is c.NOT_LITERAL:
        return bool(av != ch)
    if op is not c.IN:
        return True
    negated = bool(av) and av[0][0] is c.NEGATE
    hit = False
    for member, value in av[1:] if negated else av:
        if member is c.LITERAL:
            hit = hit or value == ch
        elif member is c.RANGE:
            hit = hit or value[0] <= ch <= value[1]
        elif member is c.CATEGORY and str(value) in _CATEGORIES:
            hit = hit or re.match(_CATEGORIES[str(value)], chr(ch)) is not None
        else:
            return True
    return hit != negated
