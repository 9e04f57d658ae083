"""The JavaScript run before an owner's code in every fresh context: ``addHandler``, a
``console`` that records instead of printing, and the entry points the worker calls. It holds
its own references to the intrinsics it uses, so code that replaces ``JSON.stringify`` or
``Array.prototype.push`` changes only what that code itself computes. The functions owners' code
calls into are named ``hookbay$…`` so that an error's place is taken from the first stack frame
that is the owner's."""

from __future__ import annotations

from typing import Final

HARNESS: Final = r"""
(function (g, maxLines, maxBytes, maxOutput) {
  "use strict";
  const stringify = JSON.stringify, parse = JSON.parse, StringOf = String;
  const freeze = Object.freeze, define = Object.defineProperty, isArray = Array.isArray;
  const logs = [];
  let logBytes = 0, dropped = 0, handler = null, failed = true, bodyJson = "";

  function text(v) {
    if (typeof v === "string") return v;
    try { const s = stringify(v); if (typeof s === "string") return s; } catch (e) {}
    try { return StringOf(v); } catch (e) { return "[unprintable]"; }
  }
  function printer(level) {
    return function hookbay$console() {
      if (logs.length >= maxLines || logBytes >= maxBytes) { dropped++; return; }
      let line = level === "log" ? "" : "[" + level + "] ";
      for (let i = 0; i < arguments.length; i++) line += (i ? " " : "") + text(arguments[i]);
      if (line.length > maxBytes - logBytes) { line = line.slice(0, maxBytes - logBytes) + "…"; }
      logBytes += line.length;
      logs[logs.length] = line;
    };
  }
  const console = freeze({
    log: printer("log"), info: printer("info"), warn: printer("warn"),
    error: printer("error"), debug: printer("debug"),
  });
  define(g, "console", { value: console, writable: false, configurable: false });
  define(g, "addHandler", {
    value: function hookbay$addHandler(type, fn) {
      if (type !== "transform") throw new TypeError("addHandler: the only handler type is 'transform'");
      if (typeof fn !== "function") throw new TypeError("addHandler: the handler must be a function");
      handler = fn;
    },
    writable: false, configurable: false,
  });

  function describe(e) {
    try {
      if (e !== null && typeof e === "object" && typeof e.message === "string") {
        const name = typeof e.name === "string" ? e.name : "Error";
        const stack = typeof e.stack === "string" ? e.stack : "";
        return { message: name + ": " + e.message, stack: stack };
      }
      return { message: "threw a value that is not an Error: " + text(e).slice(0, 1000), stack: "" };
    } catch (inner) {
      return { message: "threw a value that cannot be described", stack: "" };
    }
  }
  function failure(kind, e) {
    const d = describe(e);
    return stringify({ kind: kind, message: d.message, stack: d.stack });
  }
  function invalid(message) {
    return stringify({ kind: "invalid_output", message: message, stack: "" });
  }

  function hookbay$run(requestJson, envJson) {
    failed = true;
    if (handler === null) {
      return stringify({ kind: "runtime", stack: "",
        message: "no handler: the code must call addHandler('transform', (request, context) => request)" });
    }
    const request = parse(requestJson);
    const context = freeze({ env: freeze(parse(envJson)) });
    let out;
    try { out = handler(request, context); } catch (e) { return failure("runtime", e); }
    const type = out === null ? "null" : isArray(out) ? "array" : typeof out;
    if (type === "undefined") return invalid("the handler returned undefined: return the request");
    if (type === "function" || type === "symbol" || type === "bigint") {
      return invalid("the handler returned a " + type + ": return the request object");
    }
    if (type === "object" && typeof out.then === "function") {
      return invalid("the handler returned a Promise: async handlers are not supported, return the request");
    }
    if (type !== "object") return invalid("the handler must return the request object, not " + type);
    const body = out.body, btype = typeof body;
    if (btype === "undefined") return invalid("the returned request has no body");
    if (btype === "function" || btype === "symbol") return invalid("request.body is a " + btype + ", not a JSON value");
    let meta;
    try {
      bodyJson = stringify(body);
      meta = stringify({ headers: out.headers, query: out.query, path: out.path });
    } catch (e) {
      return invalid("the returned request cannot be serialised as JSON (" + describe(e).message + ")");
    }
    if (bodyJson.length + meta.length > maxOutput) {
      return invalid("the returned request is larger than " + maxOutput + " bytes as JSON");
    }
    failed = false;
    return meta;
  }
  function body() { return bodyJson; }
  function registered() { return handler !== null; }
  function succeeded() { return !failed; }
  function collected() {
    const all = [];  // no prototype method here: the owner's code may have replaced them
    for (let i = 0; i < logs.length; i++) all[i] = logs[i];
    if (dropped) all[all.length] = "… " + dropped + " more console line(s) left out";
    return stringify(all);
  }
  return [hookbay$run, registered, collected, succeeded, body];
})
"""
"""A function expression: called with ``(globalThis, maxLines, maxBytes, maxOutput)``, it
installs ``console`` and ``addHandler`` and returns ``[run, registered, logs, succeeded, body]``.
``run(requestJson, envJson)`` answers the returned request's ``{headers, query, path}`` as JSON
(its body's JSON is ``body()``), or ``{kind, message, stack}`` as JSON when ``succeeded()`` is
false afterwards; ``logs()`` the console lines as a JSON array.
(Never a string built by ``+`` from a large one: the Python binding cannot read QuickJS-ng's rope
strings.)"""
