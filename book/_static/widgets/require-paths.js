// Loaded between require.js and the ipywidgets embed manager (nb_ipywidgets_js in
// _config.yml): the manager finds its own files (fonts) next to it in _static/widgets/,
// not relative to the page, so widget snapshots render offline.
(function () {
  var src = document.currentScript.src;
  var here = src.substring(0, src.lastIndexOf("/") + 1);
  require.config({paths: {"@jupyter-widgets/html-manager/dist": here + "html-manager"}});
})();
