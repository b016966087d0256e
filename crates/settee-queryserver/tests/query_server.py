#!/usr/bin/env python3
"""A small query server speaking CouchDB's whole line protocol, for tests.

Functions are Python source defining one function, as for couchpy. Map functions yield
(key, value) pairs; `require("lib/name")` returns the namespace of module `lib/name` given
by `add_lib` (or by the design document, for ddoc functions). Show, update and rewrite
functions return what CouchDB's JavaScript ones return; list functions call `start`,
`send` and `get_row` (None after the last row), which speak the list protocol.
"""
import json
import sys


def compile_fun(source, lib):
    scope = {"log": lambda m: emit(["log", m if isinstance(m, str) else json.dumps(m)]),
             "require": lambda path: load_module(lib, path)}
    before = set(scope)
    exec(source, scope)
    funs = [v for k, v in scope.items() if k not in before and callable(v)]
    if len(funs) != 1:
        raise ValueError("source must define exactly one function")
    return funs[0]


def load_module(lib, path):
    node = lib
    for part in path.split("/"):
        node = node[part]
    scope = {}
    exec(node, scope)
    return scope


def emit(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


state = {"funs": [], "lib": {}, "ddocs": {}}


class ListState:
    """The list being run: chunks not yet sent, the start response, whether rows began."""

    def __init__(self):
        self.chunks = []
        self.resp = {}
        self.started = False
        self.ended = False

    def start(self, resp):
        self.resp = resp

    def send(self, chunk):
        self.chunks.append(chunk)

    def flush(self, kind):
        out = [kind, self.chunks] + ([self.resp] if kind == "start" else [])
        self.chunks = []
        emit(out)

    def get_row(self):
        if self.ended:
            return None
        self.flush("chunks" if self.started else "start")
        self.started = True
        line = json.loads(sys.stdin.readline())
        if line[0] == "list_end":
            self.ended = True
            return None
        return line[1]


def run_list(f, head, req):
    ls = ListState()
    tail = f(head, req, ls.start, ls.send, ls.get_row)
    if not ls.started:
        ls.get_row()
    if tail is not None:
        ls.chunks.append(tail)
    return ["end", ls.chunks]


def render(f, path, args):
    """Runs a show, update, list or rewrite function; its protocol answer."""
    if path[0] == "shows":
        return ["resp", wrap(f(*args))]
    if path[0] == "updates":
        doc, resp = f(*args)
        return ["up", doc, wrap(resp)]
    if path[0] == "lists":
        return run_list(f, *args)
    out = f(*args)
    return ["ok", out] if out else ["no_dispatch_rule"]


def wrap(resp):
    return {"body": resp} if isinstance(resp, str) else resp


def handle(cmd):
    name = cmd[0]
    if name == "reset":
        state["funs"] = []
        state["lib"] = {}
        return True
    if name == "add_lib":
        state["lib"] = cmd[1]
        return True
    if name == "add_fun":
        try:
            state["funs"].append(compile_fun(cmd[1], {"views": {"lib": state["lib"]}} if state["lib"] else {}))
        except Exception as e:
            return ["error", "compilation_error", str(e)]
        return True
    if name == "map_doc":
        out = []
        for f in state["funs"]:
            try:
                out.append([[k, v] for k, v in f(cmd[1])])
            except Exception as e:
                emit(["log", "map error: %s" % e])
                out.append([])
        return out
    if name in ("reduce", "rereduce"):
        f = compile_fun(cmd[1][0], {})
        if name == "reduce":
            keys = [kv[0] for kv in cmd[2]]
            values = [kv[1] for kv in cmd[2]]
            return [True, [f(keys, values, False)]]
        return [True, [f(None, cmd[2], True)]]
    if name == "ddoc":
        if cmd[1] == "new":
            state["ddocs"][cmd[2]] = cmd[3]
            return True
        ddoc = state["ddocs"][cmd[1]]
        path, args = cmd[2], cmd[3]
        node = ddoc
        for part in path:
            node = node[part]
        f = compile_fun(node, ddoc)
        if path[0] in ("shows", "updates", "lists", "rewrites"):
            try:
                return render(f, path, args)
            except Exception as e:
                return ["error", type(e).__name__, str(e)]
        if path[0] == "filters":
            docs, req = args
            return [True, [bool(f(d, req)) for d in docs]]
        if path[0] == "validate_doc_update":
            try:
                f(*args)
            except Exception as e:
                return {"forbidden": str(e)}
            return 1
        return ["error", "unknown_command", "unsupported ddoc function " + path[0]]
    return ["error", "unknown_command", "unknown command " + name]


while True:
    line = sys.stdin.readline()
    if not line:
        break
    emit(handle(json.loads(line)))
