"""``kafkalog demo``: a page-view pipeline from raw events to Spark results, all in Kafka's file
format (install the ``demo`` extra).

Read ``pipeline.run`` top to bottom; every step is one function and ``run()`` calls them in order:

1. **Produce.** A deterministic generator invents six hours of page views on an outdoor-gear shop
   (users, pages, referrers, time on page, a newsletter spike at 09:30). They are appended to the
   topic ``pageviews`` (3 partitions, lz4) through the storage engine exactly as a Kafka producer
   and leader would: keyed by user id, so Kafka's murmur2 partitioner picks the partition; records
   grouped into producer-sized batches; ``Log.append_as_leader`` assigns the offsets.
2. **Batch job.** ``spark.read.format("kafkalog")`` reads the topic; the JSON values are parsed and
   turned into page views per page per 15-minute window, the top pages of each window, the top
   pages overall and user sessions (a session ends after 30 minutes without a view).
3. **Write results.** The top pages per window and the session summaries are written back, as JSON
   values keyed by page and by user, to two more topics with ``df.write.format("kafkalog")``.
4. **Incremental stream.** A ``readStream`` query with ``Trigger.AvailableNow`` and a checkpoint
   re-keys page views by page into a fourth topic. It runs once (reading everything so far), then
   another half hour of events is appended, then it runs again: the second run reads exactly the
   appended events, because its checkpoint remembers where the first run stopped.
5. **Report.** A summary on stdout, and a PNG chart of page views per 5 minutes.

Everything lives under one directory (``demo-data/`` by default) that a rerun wipes, so a rerun
prints the same numbers. ``run(spark, data_dir)`` is the pipeline for any SparkSession (the tests
pass theirs); ``main()`` is the command line, which starts a local session bound to 127.0.0.1.

Modules, in pipeline order: ``settings`` (what is built, when), ``events`` (the generator),
``produce`` (into topics through the storage engine), ``jobs`` (the Spark batch job, results back to
topics, the stream), ``chart``, ``report`` (what is printed), ``pipeline`` (``run``: the steps in
order) and ``main`` (the command line).
"""
