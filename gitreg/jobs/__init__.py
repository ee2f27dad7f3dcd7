"""The durable ingestion queue: submitting jobs (`queue`) apart from running
them (`runner`), so what builds the queue (`gitreg.services`) never depends on
what runs it.
"""
