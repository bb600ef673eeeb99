// oncemall storefront: the order pages ask /api/orders/{no} every second
// and update the statuses shown, until the order is settled (paid with its
// coupon used, or cancelled). No framework; the pages work without it.
"use strict";

(function () {
  var interval = 1000, giveUpAfter = 5 * 60 * 1000;

  function set(el, value) {
    if (!el || !value || el.dataset.status === value) return;
    el.textContent = value;
    el.dataset.status = value;
  }

  function poll(el) {
    var url = el.dataset.poll, started = Date.now();
    function tick() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          if (!s) return;
          set(el.querySelector("#order-status, [data-field=status]"), s.status);
          set(el.querySelector("#coupon-status"), s.coupon_status);
          set(el.querySelector("#payment-status"), s.payment_status);
          if (s.status !== "WAIT_PAY") {
            var actions = document.getElementById("actions");
            if (actions) actions.remove();
          }
          if (s.settled) { el.dataset.settled = "true"; return true; }
        })
        .catch(function () { /* the next tick asks again */ })
        .then(function (done) {
          if (!done && Date.now() - started < giveUpAfter) setTimeout(tick, interval);
        });
    }
    tick();
  }

  document.querySelectorAll("[data-poll]").forEach(poll);

  // The console's lab counts: the page asks the URL of its [data-counts]
  // tables every two seconds and writes each count's now and since into
  // its row, wherever it is.
  function counts(url) {
    function tick() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          (s && s.counts || []).forEach(function (c) {
            var row = document.querySelector('[data-count="' + c.key + '"]');
            if (!row) return;
            var now = row.querySelector("[data-field=now]"), since = row.querySelector("[data-field=since]");
            now.textContent = c.error ? "unavailable" : String(c.now);
            now.title = c.error || "";
            since.textContent = c.since === undefined ? "" : String(c.since);
          });
        })
        .catch(function () { /* the next tick asks again */ })
        .then(function () { setTimeout(tick, 2000); });
    }
    tick();
  }

  var table = document.querySelector("[data-counts]");
  if (table) counts(table.dataset.counts);
})();
