-- wrk script: POST schedule.json on each keep-alive connection, back to back.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "project=testproj&spider=slow&seconds=600"
local errors = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"jobid"', 1, true) then
    errors = errors + 1
    if errors < 3 then io.stderr:write(body .. "\n") end
  end
end
done = function(summary, latency, requests)
  io.write(string.format("schedule_errors=%d\n", errors))
end
