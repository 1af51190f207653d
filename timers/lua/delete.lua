forget(ARGV[1])
return 1
