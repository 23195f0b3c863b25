"""The Python way in: `@app.task`, periodic jobs and their sending, on top of the engine's
queues, schedules and consumers (the job format is the engine's: `tidings.jobs.handlers`)."""
