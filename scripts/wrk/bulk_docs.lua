-- POSTs _bulk_docs with 1,000 new small documents per request (ids unique per thread).
-- wrk -t1 -c1 -d10s -s scripts/wrk/bulk_docs.lua -H "Authorization: ..." URL/db/_bulk_docs
local counter = 0
thread_id = 0
local next_thread = 0

function setup(thread)
  thread:set("thread_id", next_thread)
  next_thread = next_thread + 1
end

function request()
  local docs = {}
  for i = 1, 1000 do
    counter = counter + 1
    docs[i] = string.format('{"_id":"t%d-%09d","name":"x","n":%d}', thread_id, counter, counter)
  end
  local body = '{"docs":[' .. table.concat(docs, ",") .. ']}'
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers["Content-Type"] = "application/json"
  return wrk.format("POST", nil, headers, body)
end
