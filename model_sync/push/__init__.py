"""`push`: the publish protocol (`publish`), the files it uploads (`uploads`), its options (`push_options`),
the caches that let it skip work (`skip_cache`) and the push-time warning about
error responses no Triton counter sees (`error_responses`)."""
