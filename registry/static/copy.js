// Copy buttons: progressive enhancement; without JavaScript the text stays selectable.
(function () {
  if (!navigator.clipboard) return;
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var target = button.getAttribute("data-copy-target");
      var text = target ? document.getElementById(target).textContent : button.getAttribute("data-copy");
      navigator.clipboard.writeText(text).then(function () {
        button.textContent = "Copied";
        button.classList.add("copied");
        setTimeout(function () { button.textContent = "Copy"; button.classList.remove("copied"); }, 1500);
      });
    });
  });
})();
