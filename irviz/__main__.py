from irviz.cli.commands import main

raise SystemExit(main())
