#!/bin/bash
# Test job: keep one CPU busy (a shell loop, no sleeping) for $1 seconds of wall time,
# whatever the frequency, so the stand-in counts the job's cores as fully used.
end=$((SECONDS + ${1:-1}))
while [ $SECONDS -lt $end ]; do :; done
