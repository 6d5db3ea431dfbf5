// Progressive enhancement only: every page works without this file.
document.addEventListener("change", function (e) {
  var all = e.target;
  if (!all.classList || !all.classList.contains("select-all")) return;
  var boxes = all.form.querySelectorAll('input[type=checkbox][name=id]');
  for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
});
document.addEventListener("click", function (e) {
  var b = e.target.closest && e.target.closest("[data-confirm]");
  if (b && !window.confirm(b.getAttribute("data-confirm"))) e.preventDefault();
});
