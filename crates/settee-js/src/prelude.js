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
    cache[id] = module;
    var dir = path.slice(0, -1);
    var body = new Function("module", "exports", "require", source + "\n");
    body(module, module.exports, function (name) { return load(resolve(dir, name)); });
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
function __reducer(source) {
  var fn = __compile(source, function () {
    throw __fail("invalid_require_path", "require() is not available in reduce functions");
  });
  return function (keysText, valuesText, rereduce) {
    var keys = keysText == null ? null : JSON.parse(keysText);
    var result = fn(keys, JSON.parse(valuesText), rereduce);
    var text = JSON.stringify(result === undefined ? null : result);
    return text === undefined ? "null" : text;
  };
}

// A batch filter for a `filters` function (`require` over the whole design document):
// given a JSON array of documents and the request object, returns a JSON array of booleans.
// A filter that throws for a document lets it through as false, and is logged.
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
        out[i] = false;
      }
    }
    return JSON.stringify(out);
  };
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
