// The interactive API browser: renders the OpenAPI document of this server
// and sends requests to it with the token typed above (kept in this page
// only; never stored).
(function () {
  "use strict";
  var ops = document.getElementById("ops");
  var filter = document.getElementById("filter");
  var token = document.getElementById("token");
  var base = location.pathname.replace(/\/docs\/?$/, "");

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function render(doc) {
    ops.textContent = "";
    Object.keys(doc.paths).sort().forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        if (typeof op !== "object" || !op.responses) return;
        var M = method.toUpperCase();
        var d = el("details");
        d.dataset.search = (path + " " + (op.summary || "")).toLowerCase();
        var s = el("summary");
        s.appendChild(el("span", { "class": "m " + M }, M));
        s.appendChild(el("span", op.deprecated ? { "class": "dep" } : {}, path));
        s.appendChild(document.createTextNode("  " + (op.summary || "")));
        d.appendChild(s);
        var body = el("div", { "class": "body" });
        if (op.description) body.appendChild(el("p", {}, op.description));
        var inputs = {};
        (op.parameters || []).forEach(function (p) {
          if (p.in !== "path" && p.in !== "query") return;
          var l = el("label", {}, p.in + " " + p.name + " ");
          var i = el("input", { type: "text", placeholder: p.description || "" });
          inputs[p.in + ":" + p.name] = i;
          l.appendChild(i);
          body.appendChild(l);
          body.appendChild(el("br"));
        });
        var ta = null;
        if (op.requestBody) {
          ta = el("textarea", { placeholder: "JSON body" }, "{}");
          body.appendChild(ta);
        }
        var send = el("button", {}, "Send");
        var out = el("pre");
        send.addEventListener("click", function () {
          var url = path.replace(/\{([^}]+)\}/g, function (_, n) {
            var i = inputs["path:" + n];
            return encodeURIComponent(i ? i.value : "");
          });
          var q = [];
          Object.keys(inputs).forEach(function (k) {
            if (k.indexOf("query:") === 0 && inputs[k].value) q.push(encodeURIComponent(k.slice(6)) + "=" + encodeURIComponent(inputs[k].value));
          });
          if (q.length) url += "?" + q.join("&");
          var headers = {};
          if (token.value) headers["Authorization"] = "Bearer " + token.value;
          var init = { method: M, headers: headers };
          if (ta) { headers["Content-Type"] = "application/json"; init.body = ta.value; }
          out.textContent = "…";
          fetch(url, init).then(function (r) {
            return r.text().then(function (t) {
              var pretty = t;
              try { pretty = JSON.stringify(JSON.parse(t), null, 2); } catch (e) { /* not JSON */ }
              out.textContent = r.status + " " + r.statusText + "\n\n" + pretty;
            });
          }, function (e) { out.textContent = String(e); });
        });
        body.appendChild(send);
        body.appendChild(out);
        d.appendChild(body);
        ops.appendChild(d);
      });
    });
  }

  filter.addEventListener("input", function () {
    var f = filter.value.toLowerCase();
    Array.prototype.forEach.call(ops.children, function (d) {
      d.style.display = !f || (d.dataset.search || "").indexOf(f) >= 0 ? "" : "none";
    });
  });

  fetch(base + "/docs/openapi.json").then(function (r) { return r.json(); }).then(render, function (e) {
    ops.textContent = "Could not load the OpenAPI document: " + e;
  });
})();
