// junban console: the overview's live refresh and its chart. No dependency.
"use strict";
(function () {
  if (document.body.dataset.page !== "overview") return;
  var every = 2000;
  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? undefined : o[k]; }, obj);
  }
  function fmt(v, el) {
    if (v === undefined || v === null) return "0";
    if (typeof v === "number") {
      if (el.dataset.k.indexOf("depths.") === 0 && v < 0) return "?";
      var s = Number.isInteger(v) ? String(v) : v.toFixed(1);
      return el.dataset.unit ? s + " " + el.dataset.unit : s;
    }
    if (el.dataset.k === "at") return v.replace("T", " ").replace(/Z$/, "").slice(0, 23);
    return String(v);
  }
  function points(hist, key, top) {
    var n = hist.length;
    return hist.map(function (s, i) {
      var x = n > 1 ? (600 * i) / (n - 1) : 600;
      var y = 135 - (130 * Math.max(0, get(s, key) || 0)) / top;
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
  }
  function draw(hist) {
    var svg = document.getElementById("chart");
    if (!svg || !hist.length) return;
    var keys = ["processed_per_sec", "persisted_per_sec", "depths.orders"];
    var top = 1;
    hist.forEach(function (s) { keys.forEach(function (k) { top = Math.max(top, get(s, k) || 0); }); });
    var lines = svg.querySelectorAll("polyline");
    keys.forEach(function (k, i) { lines[i].setAttribute("points", points(hist, k, top)); });
    document.getElementById("chart-max").textContent = top.toFixed(0);
    var span = (Date.parse(hist[hist.length - 1].at) - Date.parse(hist[0].at)) / 1000;
    document.getElementById("chart-span").textContent = "last " + Math.round(span) + " s";
  }
  function apply(d) {
    document.querySelectorAll("[data-k]").forEach(function (el) {
      el.textContent = fmt(get(d.last, el.dataset.k), el);
    });
    draw(d.history || []);
  }
  function tick() {
    fetch("/overview.json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d) { apply(d); document.body.dataset.refreshed = String(Date.now()); } })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { setTimeout(tick, every); });
  }
  window.addEventListener("DOMContentLoaded", function () { tick(); });
})();
