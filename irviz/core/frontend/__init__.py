"""Model files, samples, capture with torch.export, and import into Relax with provenance."""
