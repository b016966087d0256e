// CouchDB's JavaScript environment for design document functions, and the entry points the
// engine calls. Evaluated once per engine; `__log` is provided by the host.
"use strict";

var __rows = null;

function emit(key, value) {
  if (__rows === null) {
    throw new Error("emit() may only be called from a map function");
  }
  __rows.push([key === undefined ? null : key, value === undefined ? null : value]);
}

function sum(values) {
  var total = 0;
  for (var i = 0; i < values.length; i++) {
    total += values[i];
  }
  return total;
}

function toJSON(value) {
  return JSON.stringify(value);
}

function isArray(value) {
  return Array.isArray(value);
}

function log(message) {
  __log(typeof message === "string" ? message : JSON.stringify(message));
}

// Tells the host that a caught exception means the heap ran out (QuickJS throws null when
// it cannot even make the error): whatever filled it may still hold it, so the host replaces
// the engine after the call.
function __note(e) {
  if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
    __exhausted();
  }
}

function __describe(e) {
  __note(e);
  if (e && typeof e === "object" && !(e instanceof Error)) {
    try { return JSON.stringify(e); } catch (_) { /* fall through */ }
  }
  return String(e) + (e && e.stack ? "\n" + e.stack : "");
}

function __fail(error, reason) {
  var e = new Error(reason);
  e.couchError = error;
  return e;
}

// CommonJS `require` over the string members of `root` (paths like "views/lib/util"), as
// CouchDB resolves them: "./" and "../" relative to the requiring module, cached per root.
function __makeRequire(root) {
  var cache = {};
  function resolve(dir, name) {
    if (typeof name !== "string") {
      throw __fail("invalid_require_path", "require() needs a string path");
    }
    var path = name.charAt(0) === "." ? dir.slice() : [];
    var parts = name.split("/");
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      if (part === "..") {
        if (path.length === 0) {
          throw __fail("invalid_require_path", "Object has no parent: " + name);
        }
        path.pop();
      } else if (part !== "." && part !== "") {
        path.push(part);
      }
    }
    return path;
  }
  function load(path) {
    var id = path.join("/");
    if (Object.prototype.hasOwnProperty.call(cache, id)) {
      return cache[id].exports;
    }
    var source = root;
    for (var i = 0; i < path.length; i++) {
      source = source !== null && typeof source === "object" ? source[path[i]] : undefined;
    }
    if (typeof source !== "string") {
      throw __fail("invalid_require_path", "Object has no property \"" + id + "\"");
    }
    var module = { id: id, exports: {} };
    // As in CouchDB, a module required again while it loads (a circular require) gets an
    // empty object of its own, not its exports so far.
    cache[id] = { exports: {} };
    var dir = path.slice(0, -1);
    try {
      var body = new Function("module", "exports", "require", source + "\n");
      body(module, module.exports, function (name) { return load(resolve(dir, name)); });
    } catch (e) {
      delete cache[id];
      throw e;
    }
    cache[id] = module;
    return module.exports;
  }
  return function (name) { return load(resolve([], name)); };
}

// Turns a design document function's source into a function, with `require` in scope.
function __compile(source, require) {
  var text = String(source).replace(/[\s;]+$/, "");
  var fn;
  try {
    fn = new Function("require", "return (" + text + "\n);")(require);
  } catch (e) {
    throw __fail("compilation_error", __describe(e) + " (" + source + ")");
  }
  if (typeof fn !== "function") {
    throw __fail("compilation_error", "Expression does not eval to a function. (" + source + ")");
  }
  return fn;
}

// A batch mapper for the map functions `sources`: given a JSON array of documents, returns
// a JSON array with, per document, per function, the emitted [key, value] pairs. A function
// that throws for a document is logged and emits nothing for it, as in CouchDB.
function __program(sources, lib) {
  var require = __makeRequire({ views: { lib: lib } });
  var fns = sources.map(function (s) { return __compile(s, require); });
  return function (docsText) {
    var docs = JSON.parse(docsText);
    var out = new Array(docs.length);
    for (var i = 0; i < docs.length; i++) {
      var doc = docs[i];
      var per = new Array(fns.length);
      for (var j = 0; j < fns.length; j++) {
        __rows = [];
        try {
          fns[j](doc);
          per[j] = __rows;
        } catch (e) {
          __log("function raised exception " + __describe(e) + " with doc._id " + (doc && doc._id));
          per[j] = [];
        }
      }
      __rows = null;
      // Each document's rows become text at once, as in CouchDB: a function may change an
      // emitted object while mapping a later document.
      try {
        out[i] = JSON.stringify(per);
      } catch (e) {
        __log("emitted values of doc._id " + (doc && doc._id) + " are not JSON: " + __describe(e));
        out[i] = JSON.stringify(fns.map(function () { return []; }));
      }
    }
    return "[" + out.join(",") + "]";
  };
}

// A reducer: given JSON keys (or null when rereducing) and values, returns the JSON result.
// As in CouchDB, a function that throws is logged and reduces to null, unless it threw
// "fatal_error" or ["fatal", error, reason]; a heap that ran out stays an error.
function __reducer(source) {
  var fn = __compile(source, function () {
    throw __fail("invalid_require_path", "require() is not available in reduce functions");
  });
  return function (keysText, valuesText, rereduce) {
    var keys = keysText == null ? null : JSON.parse(keysText);
    var result;
    try {
      result = fn(keys, JSON.parse(valuesText), rereduce);
    } catch (e) {
      __note(e);
      if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
        throw e;
      }
      if (e === "fatal_error") {
        throw __fail("map_runtime_error", "function raised 'fatal_error'");
      }
      if (Array.isArray(e) && e[0] === "fatal") {
        throw __fail(String(e[1]), String(e[2]));
      }
      __log("function raised exception " + __describe(e));
      result = null;
    }
    var text = JSON.stringify(result === undefined ? null : result);
    return text === undefined ? "null" : text;
  };
}

// A batch filter for a `filters` function (`require` over the whole design document):
// given a JSON array of documents and the request object, returns a JSON array of booleans.
// A filter that throws fails the call, as CouchDB fails the feed: with the `error` and
// `reason` it threw, an Error's name and message, or CouchDB's `unknown_error`.
function __filter(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (docsText, reqText) {
    var docs = JSON.parse(docsText);
    var req = JSON.parse(reqText);
    var out = new Array(docs.length);
    for (var i = 0; i < docs.length; i++) {
      try {
        out[i] = !!fn(docs[i], req);
      } catch (e) {
        __log("filter raised exception " + __describe(e) + " with doc._id " + (docs[i] && docs[i]._id));
        throw __filterFailure(e);
      }
    }
    return JSON.stringify(out);
  };
}

// `_changes?filter=_view`: a view's map function as a batch filter, passing the documents
// it emits a row for. Unlike in a view, an exception fails the call (and the feed), as
// CouchDB's does.
function __viewFilter(source, ddoc) {
  var fn = __compile(source, __makeRequire({ views: { lib: (ddoc.views || {}).lib } }));
  return function (docsText) {
    var docs = JSON.parse(docsText);
    var out = new Array(docs.length);
    try {
      for (var i = 0; i < docs.length; i++) {
        __rows = [];
        try {
          fn(docs[i]);
        } catch (e) {
          __log("function raised exception " + __describe(e) + " with doc._id " + (docs[i] && docs[i]._id));
          throw __filterFailure(e);
        }
        out[i] = __rows.length > 0;
      }
    } finally {
      __rows = null;
    }
    return JSON.stringify(out);
  };
}

// What a filter's exception fails its feed with (the heap running out stays itself).
function __filterFailure(e) {
  if (e === null || (e instanceof InternalError && /out of memory/.test(e.message))) {
    return e;
  }
  if (e && typeof e.error === "string" && e.reason !== undefined) {
    return __fail(e.error, typeof e.reason === "string" ? e.reason : JSON.stringify(e.reason));
  }
  if (e instanceof Error) {
    return __fail(e.name, e.message);
  }
  return __fail("unknown_error", "unnamed_error");
}

// A `validate_doc_update` function (`require` over the whole design document), called with
// the new document, the old one (or null), the user context and the security object as JSON
// texts. Answers "ok", or the error name and the reason on two lines for a thrown
// `{forbidden: …}`, `{unauthorized: …}` or other value; a thrown Error fails the call itself.
function __validator(source, ddoc) {
  var fn = __compile(source, __makeRequire(ddoc));
  return function (newText, oldText, ctxText, secText) {
    try {
      fn.call(ddoc, JSON.parse(newText), JSON.parse(oldText), JSON.parse(ctxText), JSON.parse(secText));
      return "ok";
    } catch (e) {
      __note(e);
      var text = function (v) { return typeof v === "string" ? v : JSON.stringify(v); };
      if (e && typeof e === "object" && e.forbidden !== undefined) {
        return "forbidden\n" + text(e.forbidden);
      }
      if (e && typeof e === "object" && e.unauthorized !== undefined) {
        return "unauthorized\n" + text(e.unauthorized);
      }
      if (e && e.name && e.stack) {
        throw e;
      }
      return "unknown_error\n" + text(e);
    }
  };
}

// What tells the host how a call went cannot be replaced by the functions it runs.
["__note", "__exhausted", "__describe"].forEach(function (name) {
  Object.defineProperty(globalThis, name, { writable: false, configurable: false });
});
