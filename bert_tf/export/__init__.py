"""SavedModels for TF Serving that take raw text, and TF Hub-style exports.

Entry points:
  exporter.export_from_checkpoint(checkpoint, config, export_base, vocab_file, kind)
  exporter.build_serving_module(experiment, model, vocab_file, kind) and
    exporter.write_saved_model(module, export_base, version)
  fill_mask.export_fill_mask(model_or_checkpoint, config, vocab_file, export_dir)
  query.load(export_dir) and query.ask(export, texts): an export of any kind asked
  hub.export_hub_pair(encoder, vocab_file, export_dir, pretrainer=None)
  rest_request.make_body / signature_columns: TF Serving REST request bodies
  serving_ops_check.unexpected_ops(export_dir): ops outside the TF Serving allowlist
"""
