"""Tests whose assertions cannot vanish: an ast finder over tests/*.py, run as a test so it stays so.

Issue 24 asks that no test can pass without checking anything. Three rules, each a test at the end
(``python -m tests.test_test_hygiene`` lists the hits, one a line):

(a) **Every test asserts.** A test function (``test_*``, module level) contains an assertion: an
    ``assert``, ``pytest.raises``/``warns``/``fail``/``deprecated_call``, ``raise AssertionError``, or
    a call of a helper with an assertion in it. A helper is a function of tests/: module level in the
    same file, nested in the test, or imported ``from tests.<module> import name`` (or ``from tests
    import <module>``), or one of the fuzz targets' properties that tests share with the fuzzer
    (``fuzz/*.py``, imported ``from fuzz.<module> import name`` or ``from fuzz import <module>``).
    Passing a helper by name to a call (``nursery.start_soon(check)``, ``trio.to_thread.run_sync(check)``)
    counts as calling it. Fixtures do not count: the test itself must check.

(b) **No assertion can be skipped over.** Every path through a test that ends normally (falls off the
    end or returns) passes an assertion; a helper counts here only if it passes this rule itself. A
    loop body may run zero times, unless it iterates a non-empty literal, ``range(<positive literal>)``,
    ``enumerate``/``zip``/``sorted``/``.items()``/... of one, or a name assigned once to one; ``while
    True`` runs. An ``if`` may take the other branch, an ``except`` may be entered before the ``try``
    body asserted, an early ``return`` leaves the rest unrun. Paths that end in ``raise`` or
    ``pytest.skip``/``fail`` never pass silently, so they do not count. A call in a comprehension or
    behind ``and``/``or``/``x if c else y`` may not run either: it counts only as the first operand.

(c) **Isolation layers skip on platform facts only.** In the tests of the sandbox's layers
    (:data:`ISOLATION`, :data:`ISOLATION_TESTS`), a ``pytest.skip`` or ``skipif`` stands on a condition
    built from :data:`PLATFORM_FACTS` (the standard library's view of the machine, the kernel facts of
    tests/platform_facts.py, which is itself the allowed source and not scanned), never on what hostd
    or the sandbox reported (its probe, a plan, a launch's isolation, an exception it raised): a
    regression there would turn the test into a skip. The condition is the ``if`` around the skip,
    the ``try`` body whose exception an ``except`` skips on, or ``skipif``'s first argument; names are
    followed to what they were assigned (in the function, then the module), and a helper's parameters
    to what its callers in the same file pass. A test's or fixture's parameters are pytest's to supply
    (parametrize's values, fixtures) and count as given.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: The fuzz package's modules (not its entry points): the properties the tests share with the fuzzer.
FUZZ_HELPERS = sorted((TESTS.parent / "fuzz").glob("[!_]*.py"))

#: The tests of the sandbox's isolation layers (rule c), by glob, plus the single tests elsewhere that
#: check a layer end to end (file name: test names).
ISOLATION = ("test_sandbox_*.py", "test_grant_folders.py", "test_prepare_sandbox.py")
ISOLATION_TESTS = {
    "test_lifecycle.py": {"test_parent_grants_ports_and_per_plugin_limits"},
    "test_prepare.py": {"test_a_prepared_npx_server_starts_under_strict_as_nobody"},
}

#: Names a skip condition may be built from (rule c): the standard library's view of the platform and
#: the tests' own platform-fact helpers, none of which asks hostd or the sandbox anything.
PLATFORM_FACTS = frozenset(
    {
        "sys",
        "os",
        "shutil",
        "Path",
        "pytest",  # pytest.importorskip of a third-party module
        # tests/nobody.py: root, setpriv, the system Python
        "skip_reason",
        # tests/platform_facts.py: what the kernel offers, asked of the kernel directly
        "platform_facts",
        "landlock_abi",
        "platform_offers",
        # tests/test_sandbox_sweep.py: util-linux unshare can make a user + pid namespace
        "unshare_works",
        # hostd.cli.client: os.environ's PATH with this interpreter's folder first (which tools are installed)
        "plugin_environment",
    }
)

#: ``pytest.<name>`` calls that are assertions.
PYTEST_ASSERTS = frozenset({"raises", "warns", "fail", "deprecated_call"})
#: ``pytest.<name>`` calls that end the test visibly (never a silent pass).
PYTEST_ENDS = frozenset({"skip", "fail", "xfail", "exit"})


def _is_pytest_attr(node: ast.expr, names: Iterable[str]) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "pytest"
        and node.attr in names
    )


def _is_pytest_call(node: ast.AST, names: Iterable[str]) -> bool:
    return isinstance(node, ast.Call) and _is_pytest_attr(node.func, names)


def _definitions(body: Iterable[ast.stmt]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {s.name: s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}


@dataclass
class Module:
    """One file of tests/: its functions and the helpers it imports from other files of tests/."""

    path: Path
    tree: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # local name -> (module, name)
    modules: dict[str, str] = field(default_factory=dict)  # local name -> module of tests/
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)  # module-level name -> its values

    @classmethod
    def read(cls, path: Path) -> Module:
        tree = ast.parse(path.read_text(), str(path))
        module = cls(path, tree, _definitions(tree.body))
        module.assigned = _assignments(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests."):
                for alias in node.names:
                    module.imported[alias.asname or alias.name] = (node.module.removeprefix("tests."), alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module == "tests":
                for alias in node.names:
                    module.modules[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fuzz."):
                for alias in node.names:
                    module.imported[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module == "fuzz":
                for alias in node.names:
                    module.modules[alias.asname or alias.name] = f"fuzz.{alias.name}"
        return module


class Suite:
    """Every file of tests/ (and the helper modules outside it, ``helpers``: fuzz/'s, as ``fuzz.<stem>``) and
    which of their functions assert (rule b's sense), found to a fixpoint."""

    def __init__(self, folder: Path = TESTS, helpers: list[Path] | None = None) -> None:
        self.modules = {p.stem: Module.read(p) for p in sorted(folder.glob("*.py"))}
        self.modules |= {f"fuzz.{p.stem}": Module.read(p) for p in helpers or []}
        self.asserting: set[int] = set()  # id() of the FunctionDef nodes that always assert
        self.checking: set[int] = set()  # id() of those with an assertion on some path
        self._chains: dict[str, dict[int, list[ast.AST]]] = {}
        everything = [(m, function) for m in self.modules.values() for function in self._all_functions(m)]
        changed = True
        while changed:
            changed = False
            for module, function in everything:
                if id(function) not in self.checking and self.has_assertion(module, function):
                    self.checking.add(id(function))
                    changed = True
        changed = True
        while changed:  # a helper asserts once a helper it calls does
            changed = False
            for module, function in everything:
                if id(function) not in self.asserting and self.always_asserts(module, function):
                    self.asserting.add(id(function))
                    changed = True

    @staticmethod
    def _all_functions(module: Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield node

    def resolve(self, module: Module, scopes: list[ast.AST], func: ast.expr) -> ast.AST | None:
        """The function of tests/ that ``func`` names, or None."""
        if isinstance(func, ast.Name):
            for scope in reversed(scopes):
                found = _definitions(getattr(scope, "body", [])).get(func.id)
                if found is not None:
                    return found
            if func.id in module.functions:
                return module.functions[func.id]
            if func.id in module.imported:
                source, name = module.imported[func.id]
                other = self.modules.get(source)
                return other.functions.get(name) if other else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in module.modules:
            other = self.modules.get(module.modules[func.value.id])
            return other.functions.get(func.attr) if other else None
        return None

    def call_asserts(
        self, module: Module, scopes: list[ast.AST], call: ast.Call, helpers: set[int] | None = None
    ) -> bool:
        """Whether ``call`` is an assertion: pytest's, or a call of one of ``helpers`` (default: those that
        always assert), or one passed by name as an argument (``start_soon(check)``)."""
        helpers = self.asserting if helpers is None else helpers
        if _is_pytest_call(call, PYTEST_ASSERTS):
            return True
        for named in [call.func, *(a for a in call.args if isinstance(a, ast.Name))]:
            target = self.resolve(module, scopes, named)
            if target is not None and id(target) in helpers:
                return True
        return False

    def expr_asserts(self, module: Module, scopes: list[ast.AST], node: ast.AST | None) -> bool:
        """Whether evaluating ``node`` always runs an assertion (first operands only; no lambdas or comprehensions)."""
        if node is None or isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            return False
        if isinstance(node, ast.BoolOp):
            return self.expr_asserts(module, scopes, node.values[0])
        if isinstance(node, ast.IfExp):
            return self.expr_asserts(module, scopes, node.test)
        if isinstance(node, ast.Call) and self.call_asserts(module, scopes, node):
            return True
        return any(self.expr_asserts(module, scopes, child) for child in ast.iter_child_nodes(node))

    def always_asserts(self, module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Rule (b): every path through ``function`` that returns passes an assertion."""
        flow = Flow(self, module, [*self._enclosing(module, function), function])
        exits = flow.block(function.body, {("fall", False)})
        return not any(kind in ("fall", "return") and not asserted for kind, asserted in exits)

    def has_assertion(self, module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Rule (a): anything in ``function`` (outside nested definitions) that asserts, on any path: a
        helper counts if anything in it asserts."""
        scopes = [*self._enclosing(module, function), function]
        for node in _walk_own(function):
            if isinstance(node, ast.Assert):
                return True
            if isinstance(node, ast.Raise) and _raises_assertion(node):
                return True
            if isinstance(node, ast.Call) and self.call_asserts(module, scopes, node, self.checking):
                return True
        return False

    def _enclosing(self, module: Module, function: ast.AST) -> list[ast.AST]:
        """The functions ``function`` is nested in, outermost first."""
        chains = self._chains.get(str(module.path))
        if chains is None:
            chains = self._chains[str(module.path)] = {}

            def visit(node: ast.AST, path: list[ast.AST]) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                        chains[id(child)] = path
                        visit(child, [*path, child])
                    else:
                        visit(child, path)

            visit(module.tree, [])
        return chains.get(id(function), [])


def _walk_own(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not descending into nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _raises_assertion(node: ast.Raise) -> bool:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "AssertionError"


Exits = set[tuple[str, bool]]  # (how a block was left: fall/return/break/continue/raise, asserted on the way)


class Flow:
    """The paths through a function body, each an exit kind and whether it asserted (rule b)."""

    def __init__(self, suite: Suite, module: Module, scopes: list[ast.AST]) -> None:
        self.suite, self.module, self.scopes = suite, module, scopes
        self.locals = _assignments(scopes[-1])

    def asserts(self, node: ast.AST | None) -> bool:
        return self.suite.expr_asserts(self.module, self.scopes, node)

    def block(self, body: list[ast.stmt], entry: Exits) -> Exits:
        done: Exits = {e for e in entry if e[0] != "fall"}
        falling = {a for kind, a in entry if kind == "fall"}
        for statement in body:
            after: Exits = set()
            for asserted in falling:
                after |= {(kind, asserted or a) for kind, a in self.statement(statement)}
            done |= {e for e in after if e[0] != "fall"}
            falling = {a for kind, a in after if kind == "fall"}
            if not falling:
                break
        return done | {("fall", a) for a in falling}

    def statement(self, node: ast.stmt) -> Exits:
        if isinstance(node, ast.Assert):
            return {("fall", True)}
        if isinstance(node, ast.Raise):
            return {("raise", True)}
        if isinstance(node, ast.Return):
            return {("return", self.asserts(node.value))}
        if isinstance(node, ast.Break):
            return {("break", False)}
        if isinstance(node, ast.Continue):
            return {("continue", False)}
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return {("fall", False)}
        if isinstance(node, ast.Expr) and _is_pytest_call(node.value, PYTEST_ENDS):
            return {("raise", True)}
        if isinstance(node, ast.If):
            first = self.asserts(node.test)
            if isinstance(node.test, ast.Constant):
                taken = node.body if node.test.value else node.orelse
                return self.block(taken, {("fall", first)})
            return self.block(node.body, {("fall", first)}) | self.block(node.orelse, {("fall", first)})
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return self.loop(node)
        if isinstance(node, ast.With | ast.AsyncWith):
            checked = any(self.asserts(item.context_expr) for item in node.items)
            inside = self.block(node.body, {("fall", checked)})
            if any(_is_pytest_call(i.context_expr, PYTEST_ASSERTS) for i in node.items):
                # pytest.raises: the body's raise is what it checks, and no raise fails
                return {(("fall" if kind == "raise" else kind), True) for kind, _ in inside}
            return inside
        if isinstance(node, ast.Try | ast.TryStar):
            return self.try_(node)
        if isinstance(node, ast.Match):
            exits: Exits = set()
            first = self.asserts(node.subject)
            for case in node.cases:
                exits |= self.block(case.body, {("fall", first)})
            if not any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases):
                exits.add(("fall", first))
            return exits
        return {("fall", self.asserts(node))}

    def nonempty(self, node: ast.expr, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``node`` surely yields something: a literal with an element, ``range(<positive literal>)``,
        ``enumerate``/``zip``/``sorted``/... or ``.items()``/... of such, or a name assigned once, to such."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return any(not isinstance(e, ast.Starred) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(key is not None for key in node.keys)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id == "range" and len(node.args) == 1:
                value = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
                return isinstance(value, int) and value > 0
            if node.func.id == "zip":
                return all(self.nonempty(a, seen) for a in node.args)
            if node.func.id in ("enumerate", "sorted", "reversed", "list", "tuple", "set", "dict"):
                return self.nonempty(node.args[0], seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
            return node.func.attr in ("items", "keys", "values") and self.nonempty(node.func.value, seen)
        if isinstance(node, ast.Name) and node.id not in seen:
            for values in (self.locals.get(node.id), self.module.assigned.get(node.id)):
                if values is not None:
                    return len(values) == 1 and self.nonempty(values[0], seen | {node.id})
        return False

    def loop(self, node: ast.For | ast.AsyncFor | ast.While) -> Exits:
        head = node.iter if isinstance(node, ast.For | ast.AsyncFor) else node.test
        first = self.asserts(head)
        body = self.block(node.body, {("fall", first)})
        passes = {("fall", a) for kind, a in body if kind in ("fall", "continue")}
        broken = {("fall", a) for kind, a in body if kind == "break"}
        left = {e for e in body if e[0] in ("return", "raise")}
        if isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value:
            return broken | left  # while True: left only by break, return or raise
        if isinstance(node, ast.While) or not self.nonempty(node.iter):
            passes.add(("fall", first))
        return self.block(node.orelse, passes) | broken | left

    def try_(self, node: ast.Try | ast.TryStar) -> Exits:
        body = self.block(node.body, {("fall", False)})
        exits = {e for e in body if e[0] != "fall"} | self.block(node.orelse, {e for e in body if e[0] == "fall"})
        for handler in node.handlers:  # entered before anything in the body asserted
            exits |= self.block(handler.body, {("fall", False)})
        if node.finalbody:
            closing = self.block(node.finalbody, {("fall", False)})
            if all(a for kind, a in closing if kind == "fall"):
                exits = {(kind, True) for kind, _ in exits}
            exits |= {e for e in closing if e[0] != "fall"}
        return exits


def _tests(module: Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [f for name, f in module.functions.items() if name.startswith("test_")]


def _where(module: Module, node: ast.AST) -> str:
    return f"{module.path.name}:{getattr(node, 'lineno', 0)}"


def find_testless(suite: Suite) -> list[str]:
    """Rule (a)."""
    found = []
    for module in suite.modules.values():
        if module.path.name.startswith("test_"):
            for test in _tests(module):
                if not suite.has_assertion(module, test):
                    found.append(f"{_where(module, test)} {test.name}")
    return found


def find_vanishing(suite: Suite) -> list[str]:
    """Rule (b), for the tests rule (a) passes."""
    found = []
    for module in suite.modules.values():
        if module.path.name.startswith("test_"):
            for test in _tests(module):
                if suite.has_assertion(module, test) and id(test) not in suite.asserting:
                    found.append(f"{_where(module, test)} {test.name}")
    return found


def _isolation(path: Path) -> bool:
    return any(path.match(pattern) for pattern in ISOLATION)


def _assignments(function: ast.AST) -> dict[str, list[ast.expr]]:
    values: dict[str, list[ast.expr]] = {}
    for node in _walk_own(function) if not isinstance(function, ast.Module) else function.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            targets, value = [node.target], node.iter
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and value is not None:
                    values.setdefault(name.id, []).append(value)
    return values


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _supplied_by_pytest(function: ast.AST) -> bool:
    """A test or a fixture: pytest supplies its parameters (parametrize's literals, or fixtures)."""
    if not isinstance(function, Function):
        return False
    fixture = any("fixture" in ast.unparse(d) for d in function.decorator_list)
    return fixture or function.name.startswith("test_")


def _arguments(function: Function, parameter: str, call: ast.Call) -> list[ast.expr]:
    """What ``call`` passes ``function``'s ``parameter`` (its default where it passes nothing)."""
    spec = function.args
    positional = [*spec.posonlyargs, *spec.args]
    names = [a.arg for a in positional]
    passed = [k.value for k in call.keywords if k.arg == parameter]
    if parameter in names:
        index = names.index(parameter)
        if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            passed.append(call.args[index])
        elif not passed and index >= len(positional) - len(spec.defaults):
            passed.append(spec.defaults[index - (len(positional) - len(spec.defaults))])
    elif spec.vararg is not None and parameter == spec.vararg.arg:
        passed += call.args[len(positional) :]
    elif spec.kwarg is not None and parameter == spec.kwarg.arg:
        passed += [k.value for k in call.keywords if k.arg not in names]
    else:
        kwonly = [a.arg for a in spec.kwonlyargs]
        if parameter in kwonly and not passed:
            default = spec.kw_defaults[kwonly.index(parameter)]
            passed += [default] if default is not None else []
    return passed


def _calls_of(module: Module, name: str) -> Iterator[tuple[ast.AST, ast.Call]]:
    """Each call of the module-level function ``name`` in ``module``, with the function it sits in."""
    scopes: list[ast.AST] = [module.tree, *Suite._all_functions(module)]
    for scope in scopes:
        nodes = _walk_own(scope) if scope is not module.tree else _walk_module_level(module.tree)
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                yield scope, node


def _walk_module_level(tree: ast.Module) -> Iterator[ast.AST]:
    for statement in tree.body:
        if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from ast.walk(statement)
        else:
            for decorator in statement.decorator_list:
                yield from ast.walk(decorator)


def _rests_on(module: Module, function: ast.AST, condition: ast.AST, depth: int = 0) -> set[str]:
    """The free names ``condition`` (in ``function``) rests on: local and module assignments are followed to
    their values, a helper's parameters to what its callers in the file pass (pytest's own are given)."""
    local = _assignments(function) if function is not module.tree else {}
    parameters = (
        {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)} if isinstance(function, Function) else set()
    )
    names: set[str] = set()
    seen: set[str] = set()
    todo = [condition]
    while todo:
        node = todo.pop()
        for name in ast.walk(node):
            if not isinstance(name, ast.Name) or name.id in seen:
                continue
            seen.add(name.id)
            if name.id in local:
                todo.extend(local[name.id])
            elif name.id in parameters and isinstance(function, Function):
                if _supplied_by_pytest(function):
                    continue
                calls = list(_calls_of(module, function.name)) if depth < 4 else []
                if not calls:
                    names.add(name.id)  # a helper no call of this file explains
                for caller, call in calls:
                    for argument in _arguments(function, name.id, call):
                        names |= _rests_on(module, caller, argument, depth + 1)
            elif name.id in module.assigned:
                todo.extend(module.assigned[name.id])
            elif not hasattr(builtins, name.id):
                names.add(name.id)
    return names


def _is_skipif(func: ast.expr) -> bool:
    """``pytest.mark.skipif`` (or ``mark.skipif``)."""
    if not (isinstance(func, ast.Attribute) and func.attr == "skipif"):
        return False
    return _is_pytest_attr(func.value, {"mark"}) or (isinstance(func.value, ast.Name) and func.value.id == "mark")


def _skips(tree: ast.Module) -> Iterator[tuple[ast.AST, ...]]:
    """Each skip as (the skip, its condition, the function it sits in or the module)."""

    def visit(node: ast.AST, function: ast.AST, conditions: list[ast.AST]) -> Iterator[tuple[ast.AST, ...]]:
        if _is_pytest_call(node, {"skip"}):
            yield node, (conditions[-1] if conditions else ast.Constant(True)), function
        if isinstance(node, ast.Call) and _is_skipif(node.func):
            yield node, (node.args[0] if node.args else ast.Constant(True)), function
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                yield from visit(decorator, function, conditions)
            for statement in node.body:
                yield from visit(statement, node, [])
            return
        if isinstance(node, ast.If):
            yield from visit(node.test, function, conditions)
            for statement in [*node.body, *node.orelse]:
                yield from visit(statement, function, [*conditions, node.test])
            return
        if isinstance(node, ast.Try | ast.TryStar):
            for statement in [*node.body, *node.orelse, *node.finalbody]:
                yield from visit(statement, function, conditions)
            tried = ast.Module(body=node.body, type_ignores=[])
            for handler in node.handlers:
                for statement in handler.body:
                    yield from visit(statement, function, [*conditions, tried])
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, function, conditions)

    yield from visit(tree, tree, [])


def find_product_skips(suite: Suite) -> list[str]:
    """Rule (c)."""
    found = []
    for module in suite.modules.values():
        path = module.path
        only = ISOLATION_TESTS.get(path.name)
        if not _isolation(path) and only is None:
            continue
        for skip, condition, function in _skips(module.tree):
            name = getattr(function, "name", "<module>")
            if only is not None and name not in only:
                continue
            rests_on = _rests_on(module, function, condition) - PLATFORM_FACTS
            if rests_on:
                found.append(f"{_where(module, skip)} in {name}: rests on {sorted(rests_on)}")
    return found


# -- the finder on examples: it sees what it should and nothing else (a finder that sees nothing passes the rules)

HELPERS = """
def check(x):
    assert x

def check_each(xs):
    for x in xs:
        assert x
"""

EXAMPLES = """
import pytest
from tests.helpers import check, check_each

def test_nothing():
    print("no check")

def test_only_in_a_loop(items):
    for item in items:
        assert item

def test_only_under_an_if(value):
    if value:
        assert value == 1

def test_a_helper_that_may_not_assert(items):
    check_each(items)

def test_an_early_return(value):
    if value is None:
        return
    assert value

def test_an_except_that_swallows():
    try:
        assert compute()
    except ValueError:
        pass

def test_plain():
    assert compute() == 1

def test_a_helper():
    check(compute())

def test_a_literal_loop():
    for x in (1, 2):
        assert x

def test_a_named_literal_loop():
    cases = {"a": 1}
    for name, value in cases.items():
        assert value, name

def test_raises():
    with pytest.raises(ValueError):
        compute()

def test_both_branches(value):
    if value:
        assert value == 1
    else:
        assert value == 0

def test_a_visible_skip(value):
    if not value:
        pytest.skip("no value")
    assert value

async def test_a_task(nursery):
    async def inner():
        assert await compute()
    nursery.start_soon(inner)
"""

ISOLATION_EXAMPLE = """
import shutil
import sys
import pytest
from sandbox.probe import probe
from tests.platform_facts import platform_offers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

def _need(name):
    if not any(c.available for c in probe() if c.name == name):
        pytest.skip(name)

def _need_fact(name):
    offered, why = platform_offers(name)
    if not offered:
        pytest.skip(why)

def test_on_the_probe():
    _need("pidns")
    _need_fact("netns")
    assert 1

def test_on_the_result():
    result = run()
    if "pidns" not in result["isolation"]:
        pytest.skip("no pidns")
    assert result

def test_on_an_exception():
    try:
        plan()
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert 1

@pytest.mark.skipif(shutil.which("node") is None, reason="no node")
def test_on_a_tool():
    assert 1
"""


def _suite(tmp_path: Path) -> Suite:
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "test_examples.py").write_text(EXAMPLES)
    (tmp_path / "test_sandbox_example.py").write_text(ISOLATION_EXAMPLE)
    return Suite(tmp_path)


def test_the_finder_sees_a_test_without_an_assertion(tmp_path: Path) -> None:
    assert find_testless(_suite(tmp_path)) == ["test_examples.py:5 test_nothing"]  # check_each counts here


def test_the_finder_sees_assertions_that_can_be_skipped_over(tmp_path: Path) -> None:
    assert find_vanishing(_suite(tmp_path)) == [
        "test_examples.py:8 test_only_in_a_loop",
        "test_examples.py:12 test_only_under_an_if",
        "test_examples.py:16 test_a_helper_that_may_not_assert",
        "test_examples.py:19 test_an_early_return",
        "test_examples.py:24 test_an_except_that_swallows",
    ]


def test_the_finder_sees_skips_on_what_the_sandbox_said(tmp_path: Path) -> None:
    assert find_product_skips(_suite(tmp_path)) == [
        "test_sandbox_example.py:12 in _need: rests on ['probe']",
        "test_sandbox_example.py:27 in test_on_the_result: rests on ['run']",
        "test_sandbox_example.py:34 in test_on_an_exception: rests on ['plan']",
    ]


# -- the rules, on tests/ ----------------------------------------------------------------------------

SUITE = Suite(TESTS, FUZZ_HELPERS)


def test_every_test_asserts() -> None:
    assert find_testless(SUITE) == []


def test_no_test_can_pass_without_asserting() -> None:
    assert find_vanishing(SUITE) == []


def test_isolation_tests_skip_on_platform_facts_only() -> None:
    assert find_product_skips(SUITE) == []


if __name__ == "__main__":  # a listing of the hits: python -m tests.test_test_hygiene
    for rule, hits in (("a", find_testless(SUITE)), ("b", find_vanishing(SUITE)), ("c", find_product_skips(SUITE))):
        for hit in hits:
            print(rule, hit)
