#!/usr/bin/env python3
"""A small query server speaking CouchDB's whole line protocol, for tests.

Functions are Python source defining one function, as for couchpy. Map functions yield
(key, value) pairs; `require("lib/name")` returns the namespace of module `lib/name` given
by `add_lib` (or by the design document, for ddoc functions).
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


for line in sys.stdin:
    emit(handle(json.loads(line)))
