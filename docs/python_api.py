# SPDX-License-Identifier: MIT OR Apache-2.0
"""The Python API reference page (docs/site/reference/api-python.md), generated
at docs build time from the package's source: the signatures and docstrings
of bindings/python/tickwheel/__init__.py and asyncio.py, and of the stub of
the compiled extension (_tickwheel.pyi) for what the extension implements
(tickwheel.Timer's stop() and stop_sync(), from its TimerBase). It reads the
files with ``ast``: nothing is imported, so the page builds without the
extension built (sphinx.ext.autodoc would import tickwheel, which needs the
compiled extension and the library).

docs/site/conf.py calls page() for the docname reference/api-python (the
file on disk holds only the page's title and a note); the result is MyST
Markdown whose entries are Sphinx's Python domain directives (in an
eval-rst block: the docstrings are reStructuredText), so :py:class:`...`
cross-references work. ``python3 docs/python_api.py`` prints the page.
"""

import ast
import os
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "bindings", "python", "tickwheel")

# The sections of the page, in order: (title, names of tickwheel.__all__).
SECTIONS = [
    ("Runtime", ["Runtime"]),
    ("Timer", ["Timer", "TimerInfo", "TimerState"]),
    ("Delivery queues", ["Queue"]),
    ("Period policies and clocks", ["PeriodPolicy", "PERIOD_SKIP", "PERIOD_DELAY", "PERIOD_BURST", "Clock",
                                    "CLOCK_MONOTONIC", "CLOCK_BOOTTIME", "CLOCK_REALTIME"]),
    ("Errors", ["TickwheelError", "InvalidArgumentError", "ForkedError"]),
    ("Functions and constants", ["now", "now_ns", "version", "library_path", "MAX_DELAY_S"]),
]
# Dunder methods worth listing (the context managers').
DUNDERS = {"__enter__", "__exit__"}


def _read(name):
    with open(os.path.join(PKG, name), encoding="utf-8") as f:
        return ast.parse(f.read(), filename=name)


def _all(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    return []


def _signature(fn, drop_self):
    """The parameters as written (annotations and defaults), and the return annotation."""
    args = fn.args
    parts = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(positional, defaults)):
        if i == 0 and drop_self and a.arg in ("self", "cls"):
            continue
        if a.arg.startswith("_"):
            continue  # private parameters (e.g. Timer's _token)
        parts.append(_param(a, d))
        if args.posonlyargs and a is args.posonlyargs[-1]:
            parts.append("/")
    if args.vararg:
        parts.append("*" + _param(args.vararg, None))
    elif args.kwonlyargs:
        parts.append("*")
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(_param(a, d))
    if args.kwarg:
        parts.append("**" + _param(args.kwarg, None))
    ret = " -> %s" % _annotation(fn.returns) if fn.returns is not None else ""
    return "(%s)%s" % (", ".join(parts), ret)


# The modules' private aliases, as their public names in annotations.
ALIASES = {"_tw.": "tickwheel.", "_asyncio.": "asyncio.", "_contextvars.": "contextvars.",
           "_datetime.": "datetime."}


def _annotation(node):
    s = ast.unparse(node).replace("'", "").replace('"', "")
    for k, v in ALIASES.items():
        s = s.replace(k, v)
    return s


def _param(a, default):
    s = a.arg
    if a.annotation is not None:
        s += ": " + _annotation(a.annotation)
    if default is not None:
        s += (" = " if a.annotation is not None else "=") + ast.unparse(default)
    return s


def _doc(node):
    doc = ast.get_docstring(node, clean=True)
    return doc or ""


def _block(directive, body, indent, options=()):
    """A directive, its options and its (docstring) body, indented by ``indent`` spaces."""
    pad = " " * indent
    out = [pad + directive] + [pad + "   :%s:%s" % (k, (" " + v) if v else "") for k, v in options]
    if body:
        out.append("")
        out += [(pad + "   " + line) if line.strip() else "" for line in body.splitlines()]
    out.append("")
    return out


def _class(node, module, stub_bases, indent=0):
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    sig = _signature(init, True) if init is not None else ""
    bases = [ast.unparse(b) for b in node.bases]
    lines = _block(".. py:class:: %s%s" % (node.name, sig), _doc(node), indent)
    inner = indent + 3
    if any(b in ("str", "enum.Enum") for b in bases):
        for n in node.body:
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and not n.targets[0].id.startswith("_"):
                lines += _block(".. py:attribute:: %s" % n.targets[0].id, "", inner,
                                [("value", ast.unparse(n.value))])
    members = []
    # What the extension implements (a base named _ext.X): its stub's public methods.
    for b in bases:
        if b.startswith("_ext.") and b[5:] in stub_bases:
            members += [m for m in stub_bases[b[5:]].body
                        if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")]
            members += [m for m in stub_bases[b[5:]].body
                        if isinstance(m, ast.AnnAssign) and not m.target.id.startswith("_")]
    members += [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for m in members:
        if isinstance(m, ast.AnnAssign):
            lines += _block(".. py:attribute:: %s" % m.target.id, _stub_doc(stub_bases, m), inner,
                            [("type", _annotation(m.annotation))])
            continue
        if m.name.startswith("_") and m.name not in DUNDERS:
            continue
        if m.name in DUNDERS and not _doc(m):
            continue
        decorators = [ast.unparse(d) for d in m.decorator_list]
        if "property" in decorators:
            opts = [("type", _annotation(m.returns))] if m.returns is not None else []
            lines += _block(".. py:property:: %s" % m.name, _doc(m), inner, opts)
            continue
        opts = [("async", "")] if isinstance(m, ast.AsyncFunctionDef) else []
        lines += _block(".. py:method:: %s%s" % (m.name, _signature(m, True)), _doc(m), inner, opts)
    # Dataclass fields (TimerInfo).
    if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
        for n in node.body:
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_"):
                lines += _block(".. py:attribute:: %s" % n.target.id, "", inner,
                                [("type", _annotation(n.annotation))])
    return lines


def _stub_doc(stub_bases, node):
    """The docstring of an attribute in a stub: the string literal right after it."""
    for cls in stub_bases.values():
        body = cls.body
        for i, n in enumerate(body):
            if n is node and i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) \
                    and isinstance(body[i + 1].value, ast.Constant) and isinstance(body[i + 1].value.value, str):
                return textwrap.dedent(body[i + 1].value.value).strip()
    return ""


def _entry(name, tree, module, stub_bases, comments):
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _class(node, module, stub_bases)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            opts = [("async", "")] if isinstance(node, ast.AsyncFunctionDef) else []
            return _block(".. py:function:: %s%s" % (name, _signature(node, False)), _doc(node), 0, opts)
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            for t in node.targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                targets += [e.id for e in elts if isinstance(e, ast.Name)]
            if len(targets) > 1:
                node = ast.Assign(targets=node.targets, value=None)  # unpacked: no single value to show
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        if name in targets:
            value = node.value if node.value is not None else None
            doc = comments.get(name, "")
            shown = ast.unparse(value) if value is not None and len(ast.unparse(value)) < 60 else None
            return _block(".. py:data:: %s" % name, doc, 0, [("value", shown)] if shown else [])
    raise SystemExit("docs/python_api.py: %s in __all__ but not found in %s" % (name, module))


def _comments(path):
    """``#: text`` comments before module-level assignments (Sphinx's convention)."""
    out, pending = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if s.startswith("#:"):
                pending.append(s[2:].strip())
                continue
            if pending and "=" in s and not line.startswith((" ", "\t")):
                for name in s.split("=", 1)[0].split(":")[0].split(","):
                    out[name.strip()] = " ".join(pending)
            pending = []
    return out


def page(title_block=""):
    init = _read("__init__.py")
    aio = _read("asyncio.py")
    stub = _read("_tickwheel.pyi")
    stub_bases = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    names = _all(init)
    listed = [n for _, group in SECTIONS for n in group]
    missing = [n for n in names if n not in listed]
    if missing:
        raise SystemExit("docs/python_api.py: tickwheel.__all__ names %s, which no section of the page lists"
                         % ", ".join(missing))
    comments = _comments(os.path.join(PKG, "__init__.py"))
    out = [title_block.rstrip(), ""] if title_block else []
    out += ["Generated from the package's source at each docs build (`docs/python_api.py`): the signatures and "
            "docstrings of `tickwheel/__init__.py` and `tickwheel/asyncio.py`, and of the extension's stub "
            "`_tickwheel.pyi` for what the compiled extension implements (`Timer.stop()` and "
            "`Timer.stop_sync()`). The package is typed (`py.typed`): type checkers read the same "
            "annotations. Seconds are an `int`, a `float` or a `datetime.timedelta` throughout.", ""]
    out += ["## The package", "", "```{eval-rst}", ".. py:module:: tickwheel", "", _doc(init), "```", ""]
    for title, group in SECTIONS:
        out += ["## %s" % title, "", "```{eval-rst}", ".. py:currentmodule:: tickwheel", ""]
        for name in group:
            out += _entry(name, init, "tickwheel", stub_bases, comments)
        out += ["```", ""]
    out += ["## tickwheel.asyncio", "", "```{eval-rst}", ".. py:module:: tickwheel.asyncio", "",
            _doc(aio), ""]
    for name in _all(aio):
        out += _entry(name, aio, "tickwheel.asyncio", stub_bases, _comments(os.path.join(PKG, "asyncio.py")))
    out += ["```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(page("# Python API reference"))
