// Live validation of a policy draft: post it as the administrator types, show the verdict.
// The page works without this script (the Check button posts the same form).
"use strict";

(function () {
  const draft = document.getElementById("draft");
  const verdict = document.getElementById("verdict");
  if (!draft || !verdict || !draft.dataset.check) {
    return;
  }
  let timer = null;
  let sent = 0;

  async function check() {
    const mine = ++sent;
    const body = new URLSearchParams({ draft: draft.value });
    try {
      const response = await fetch(draft.dataset.check, {
        method: "POST",
        body: body,
        credentials: "same-origin",
      });
      if (!response.ok) {
        throw new Error("the console answered " + response.status);
      }
      const answer = await response.json();
      if (mine === sent) {  // a later keystroke's answer wins
        verdict.innerHTML = answer.html;  // built and escaped by the server
        draft.setAttribute("aria-invalid", answer.ok ? "false" : "true");
        verdict.dataset.state = answer.ok ? "ok" : "error";
      }
    } catch (error) {
      if (mine === sent) {
        verdict.textContent = "Could not check the draft: " + error.message;
        verdict.dataset.state = "unknown";
      }
    }
  }

  draft.addEventListener("input", function () {
    verdict.dataset.state = "pending";
    clearTimeout(timer);
    timer = setTimeout(check, 300);
  });
})();
